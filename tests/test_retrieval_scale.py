"""A scoped HNSW read over 50,000 facts whose scope holds only 30 matches still returns
`limit` rows: iterative index scans (pgvector >= 0.8) are on for every connection."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from django.db import connection

from accounts.services import apikey_authenticate
from core import scoping
from retrieval.search import Intent, Result, Run, run_intent

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

MODEL = "test-model"
BULK, RARE = 50_000, 30


@dataclass
class FixedEmbedder:
    vector: list[float]
    model: str = MODEL
    dimensions: int = 384

    def embed_query(self, text: str) -> list[float]:
        return self.vector

    def embed_documents(self, texts):
        raise AssertionError("not used")


def _load(world) -> None:
    with connection.cursor() as cursor:
        insert = """
            INSERT INTO facts_fact (id, tenant_id, project_id, type, content, content_hash, size, text, trust, status,
                attributed_to, subjects, "references", version, created_at, updated_at, search_config, embedding, embedding_model)
            SELECT gen_random_uuid(), %(tenant)s, %(project)s, %(type)s, '"x"', 'sha256:x', 3, 'x', 'asserted', 'active',
                '{}', '[]', '[]', 1, now(), now(), 'english',
                (SELECT array_agg(random() - 0.5)::vector(384) FROM generate_series(1, 384) WHERE g > 0), %(model)s
            FROM generate_series(1, %(count)s) AS g
        """
        base = {"tenant": world.acme.id, "project": world.desk.id, "model": MODEL}
        # The product index is m=16, ef_construction=64; building that over 50k random
        # vectors takes over a minute here, so this test builds a cheaper one of the same
        # kind after loading (the transaction is rolled back afterwards). The read path
        # is unchanged. These facts are the project's (no participant), so a same-project
        # read walks the project-level graph: that is the one rebuilt.
        cursor.execute("DROP INDEX fact_embedding_hnsw")
        cursor.execute("DROP INDEX fact_project_embedding_hnsw")
        cursor.execute(insert, base | {"type": "bulk.note", "count": BULK})
        cursor.execute(insert, base | {"type": "rare.note", "count": RARE})
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no pending FK checks before CREATE INDEX
        cursor.execute("SET LOCAL max_parallel_maintenance_workers = 2")
        cursor.execute("SET LOCAL maintenance_work_mem = '256MB'")
        cursor.execute(
            "CREATE INDEX fact_project_embedding_hnsw ON facts_fact USING hnsw (embedding vector_cosine_ops) "
            "WITH (m = 8, ef_construction = 16) WHERE participant_id IS NULL AND conversation_id IS NULL"
        )
        cursor.execute("ANALYZE facts_fact")


def test_narrow_scope_over_fifty_thousand_facts_returns_limit_rows(world):
    _load(world)
    principal = apikey_authenticate(raw=world.key())
    run = Run(principal=principal, query="anything", project_id=world.desk.id)
    embedder = FixedEmbedder([random.Random(7).uniform(-0.5, 0.5) for _ in range(384)])
    with scoping.scope(tenant_id=principal.tenant_id, project_id=principal.project_id), connection.cursor() as cursor:
        # Make the planner take the HNSW path, which is what this test is about.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        intent = Intent(scope="same-project", mode="semantic", limit=10, types=("rare.note",))
        hits = run_intent(run, intent, Result(), embedder=embedder)
        assert len(hits) == 10
        assert all(h.fact.type == "rare.note" for h in hits)
        assert [h.ranks["semantic"] for h in hits] == list(range(1, 11))

        cursor.execute("SELECT current_setting('hnsw.iterative_scan')")
        assert cursor.fetchone()[0] == "relaxed_order"
        cursor.execute("SET LOCAL hnsw.iterative_scan = off")
        without = run_intent(run, intent, Result(), embedder=embedder)
        assert len(without) < 10  # what a plain HNSW scan returns for such a narrow scope
