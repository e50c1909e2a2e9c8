"""Retrieval of facts: keyword, semantic and hybrid (RRF, k = 60) search, and newest-first.

Each intent is one SQL statement (one round trip). Scope and visibility — tenant,
project, participant, conversation, status, expiry, validity, types, embedding model —
are conditions in the WHERE clause of every leg, so a ranked list can never contain a
row the caller may not see and then drop it afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from facts.models import Fact
from memoryhub.errors import ValidationFailed
from memoryhub.selectors import project_search_config
from memoryhub.services import Principal
from retrieval.embeddings import Embedder, get_embedder, query_embedding

RRF_K = 60
MODES = ("none", "keyword", "semantic", "both")
FACT_SCOPES = ("same-conversation", "same-user", "same-project", "tenant")
DEFAULT_LIMIT = 10
MAX_LIMIT = 100
MIN_DEPTH = 40  # candidates per leg: at least 4 x limit, and never fewer than this

NEEDS_PARTICIPANT = (
    "{who} keeps memory per end user, but this run names none (`participantId`), so it read and kept none. "
    "Pass the person's `participantId` on each run: the user a credential acts for may serve many people."
)


@dataclass(frozen=True)
class Intent:
    scope: str
    mode: str = "none"
    limit: int = DEFAULT_LIMIT
    types: tuple[str, ...] = ()
    source: str = "facts"

    def as_dict(self) -> dict:
        body: dict[str, Any] = {"source": self.source, "scope": self.scope, "mode": self.mode, "limit": self.limit}
        if self.types:
            body["types"] = list(self.types)
        return body


@dataclass
class Run:
    """What one retrieval is for: the caller, the message, the person and the conversation."""

    principal: Principal
    query: str
    participant_id: str | None = None
    conversation_id: str | None = None
    project_id: Any = None
    who: str = "This retrieval"


@dataclass
class Hit:
    fact: Fact
    ranks: dict[str, int]
    score: float
    intent: Intent


@dataclass
class Result:
    hits: list[Hit] = field(default_factory=list)
    warnings: list[dict] = field(default_factory=list)

    def warn(self, code: str, message: str) -> None:
        if not any(w["code"] == code and w["message"] == message for w in self.warnings):
            self.warnings.append({"code": code, "message": message})


def parse_intent(raw: Any, index: int = 0) -> Intent:
    """Validate one intent as the API and agents give it."""
    where = f"intents[{index}]"
    if not isinstance(raw, dict):
        raise ValidationFailed(f"{where} must be an object", errors={where: ["must be an object"]})
    known = {"source", "types", "scope", "mode", "limit", "roles"}
    if unknown := sorted(set(raw) - known):
        raise ValidationFailed(f"{where}.{unknown[0]} is not an intent field", errors={f"{where}.{name}": ["unknown field"] for name in unknown})
    source = raw.get("source", "facts")
    if source == "conversations":
        raise ValidationFailed(
            f"{where}.source: recall of conversations is not available yet; use source \"facts\"",
            errors={f"{where}.source": ["conversations are not available yet"]},
        )
    if source != "facts":
        raise ValidationFailed(f"{where}.source must be \"facts\" or \"conversations\"", errors={f"{where}.source": ["facts or conversations"]})
    scope = raw.get("scope")
    if scope not in FACT_SCOPES:
        raise ValidationFailed(f"{where}.scope must be one of {', '.join(FACT_SCOPES)}", errors={f"{where}.scope": [f"one of {', '.join(FACT_SCOPES)}"]})
    mode = raw.get("mode", "none")
    if mode not in MODES:
        raise ValidationFailed(f"{where}.mode must be one of {', '.join(MODES)}", errors={f"{where}.mode": [f"one of {', '.join(MODES)}"]})
    limit = raw.get("limit", DEFAULT_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValidationFailed(f"{where}.limit must be a whole number from 1 to {MAX_LIMIT}", errors={f"{where}.limit": [f"1 to {MAX_LIMIT}"]})
    types = raw.get("types")
    if types is not None:
        if not isinstance(types, list) or not types or not all(isinstance(t, str) and t for t in types) or len(types) > 50:
            raise ValidationFailed(f"{where}.types must be a list of 1 to 50 fact types", errors={f"{where}.types": ["1 to 50 fact types"]})
    if "roles" in raw:
        raise ValidationFailed(f"{where}.roles is for source \"conversations\"", errors={f"{where}.roles": ["only for conversations"]})
    return Intent(scope=scope, mode=mode, limit=limit, types=tuple(types or ()))


# --- SQL ---------------------------------------------------------------------------------------

_FACT_COLUMNS = [f.column for f in Fact._meta.concrete_fields if f.column not in {"embedding", "search_vector"}]
_SELECT_FACT = ", ".join(f"f.{column}" for column in _FACT_COLUMNS)


def _conditions(run: Run, intent: Intent, params: dict) -> list[str] | None:
    """WHERE conditions for the intent's scope and the caller's visibility; None: reads nothing."""
    principal = run.principal
    params["tenant"] = principal.tenant_id
    conds = [
        "f.tenant_id = %(tenant)s",
        "f.status = 'active'",
        "(f.expires_at IS NULL OR f.expires_at > now())",
        "(f.valid_until IS NULL OR f.valid_until > now())",
    ]
    if principal.project_id is not None:  # a project key: its project and the tenant-wide facts
        params["key_project"] = principal.project_id
        conds.append("(f.project_id = %(key_project)s OR f.project_id IS NULL)")
    if intent.types:
        params["types"] = list(intent.types)
        conds.append("f.type = ANY(%(types)s)")
    if run.participant_id is not None:
        params["participant"] = run.participant_id
    if run.conversation_id is not None:
        params["conversation"] = run.conversation_id
    if run.project_id is not None:
        params["project"] = run.project_id

    if intent.scope == "same-user":
        if run.participant_id is None or run.project_id is None:
            return None
        conds += [
            "f.project_id = %(project)s",
            "f.participant_id = %(participant)s",
            "(f.conversation_id IS NULL" + (" OR f.conversation_id = %(conversation)s)" if run.conversation_id else ")"),
        ]
    elif intent.scope == "same-conversation":
        if run.conversation_id is None or run.project_id is None:
            return None
        conds += ["f.project_id = %(project)s", "f.conversation_id = %(conversation)s"]
        if run.participant_id is not None:
            conds.append("(f.participant_id IS NULL OR f.participant_id = %(participant)s)")
        else:
            conds.append("f.participant_id IS NULL")
    elif intent.scope == "same-project":
        if run.project_id is None:
            return None
        conds += ["f.project_id = %(project)s", "f.participant_id IS NULL", "f.conversation_id IS NULL"]
    else:  # tenant: what is kept for no one in particular, across what the key may see
        conds += ["f.participant_id IS NULL", "f.conversation_id IS NULL"]
    # A key bound to one participant, or one without write access, never reads another person's facts.
    if principal.participant_id is not None:
        params["bound"] = principal.participant_id
        conds.append("(f.participant_id IS NULL OR f.participant_id = %(bound)s)")
    elif not principal.can_write:
        conds.append("f.participant_id IS NULL")
    return conds


def _keyword_leg(where: str) -> str:
    return f"""
    kw AS MATERIALIZED (
        SELECT f.id, ts_rank_cd(f.search_vector, q.query) AS rank_value
        FROM facts_fact f, websearch_to_tsquery(%(config)s::regconfig, %(query)s) AS q(query)
        WHERE {where} AND f.search_vector @@ q.query
        ORDER BY rank_value DESC, f.id
        LIMIT %(depth)s
    ),
    kw_ranked AS (SELECT id, row_number() OVER (ORDER BY rank_value DESC, id) AS r FROM kw)"""


def _semantic_leg(where: str) -> str:
    return f"""
    sem AS MATERIALIZED (
        SELECT f.id, f.embedding <=> %(vector)s::vector AS distance
        FROM facts_fact f
        WHERE {where} AND f.embedding_model = %(model)s AND f.embedding IS NOT NULL
        ORDER BY distance
        LIMIT %(depth)s
    ),
    sem_ranked AS (SELECT id, row_number() OVER (ORDER BY distance, id) AS r FROM sem)"""


def _sql(intent_mode: str, where: str) -> str:
    if intent_mode == "none":
        return f"""
        SELECT {_SELECT_FACT}, NULL::bigint AS kr, NULL::bigint AS sr, 0::float8 AS score
        FROM facts_fact f WHERE {where}
        ORDER BY f.updated_at DESC, f.id DESC LIMIT %(limit)s"""
    legs, joins = [], []
    if intent_mode in ("keyword", "both"):
        legs.append(_keyword_leg(where))
    if intent_mode in ("semantic", "both"):
        legs.append(_semantic_leg(where))
    if intent_mode == "both":
        fused = """
        fused AS (
            SELECT COALESCE(k.id, s.id) AS id, k.r AS kr, s.r AS sr,
                   (COALESCE(1.0 / (%(k)s + k.r), 0) + COALESCE(1.0 / (%(k)s + s.r), 0))::float8 AS score
            FROM kw_ranked k FULL OUTER JOIN sem_ranked s ON s.id = k.id
        )"""
    elif intent_mode == "keyword":
        fused = "fused AS (SELECT id, r AS kr, NULL::bigint AS sr, (1.0 / (%(k)s + r))::float8 AS score FROM kw_ranked)"
    else:
        fused = "fused AS (SELECT id, NULL::bigint AS kr, r AS sr, (1.0 / (%(k)s + r))::float8 AS score FROM sem_ranked)"
    joins = ",".join(legs + [fused])
    return f"""
    WITH {joins}
    SELECT {_SELECT_FACT}, fused.kr, fused.sr, fused.score
    FROM fused JOIN facts_fact f ON f.id = fused.id
    ORDER BY fused.score DESC, LEAST(COALESCE(fused.kr, 1000000), COALESCE(fused.sr, 1000000)), f.id
    LIMIT %(limit)s"""


def _rows_to_hits(rows: list[tuple], intent: Intent) -> list[Hit]:
    hits = []
    width = len(_FACT_COLUMNS)
    for row in rows:
        fact = Fact.from_db(connection.alias, _FACT_ATTNAMES, row[:width])
        kr, sr, score = row[width:]
        ranks = {}
        if kr is not None:
            ranks["keyword"] = int(kr)
        if sr is not None:
            ranks["semantic"] = int(sr)
        hits.append(Hit(fact=fact, ranks=ranks, score=float(score), intent=intent))
    return hits


_FACT_ATTNAMES = [f.attname for f in Fact._meta.concrete_fields if f.column in _FACT_COLUMNS]


def run_intent(run: Run, intent: Intent, result: Result, *, embedder: Embedder | None = None, vector_cache: dict | None = None) -> list[Hit]:
    """Rows for one intent, ranked; adds warnings to `result`."""
    if intent.scope == "same-user" and run.participant_id is None:
        result.warn("memory-needs-participant", NEEDS_PARTICIPANT.format(who=run.who))
        return []
    params: dict[str, Any] = {"limit": intent.limit, "k": RRF_K, "depth": max(MIN_DEPTH, 4 * intent.limit)}
    conds = _conditions(run, intent, params)
    if conds is None:
        return []
    mode = intent.mode
    query = run.query.strip()
    if mode != "none" and not query:
        mode = "none"
    if mode in ("semantic", "both"):
        if embedder is None:
            result.warn(
                "semantic-unavailable",
                "Search by meaning is off (no embeddings provider is configured), so this read used keyword search only.",
            )
            mode = "keyword"
        else:
            cache = vector_cache if vector_cache is not None else {}
            if query not in cache:
                cache[query] = query_embedding(embedder, query)
            params["vector"] = str(cache[query])
            params["model"] = embedder.model
    if mode in ("keyword", "both"):
        params["query"] = query
        params["config"] = project_search_config(run.project_id)
    sql = _sql(mode, " AND ".join(conds))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return _rows_to_hits(rows, intent)


def facts_retrieve(*, run: Run, intents: list[Intent]) -> Result:
    """Run each intent; a fact found by several intents is reported once, by the first."""
    result = Result()
    embedder = get_embedder() if any(i.mode in ("semantic", "both") for i in intents) else None
    vectors: dict[str, list[float]] = {}
    seen: set = set()
    for intent in intents:
        for hit in run_intent(run, intent, result, embedder=embedder, vector_cache=vectors):
            if hit.fact.id in seen:
                continue
            seen.add(hit.fact.id)
            result.hits.append(hit)
    return result
