"""Write throughput and latency of a running memoryhub server.

    .venv/bin/python bench/facts_write.py --api-key <write key> [--url http://127.0.0.1:8000]

Phase 1: N single `POST /v1/facts` (default 500): p50/p95/p99 latency and facts/s.
Phase 2: B batches of S facts on `POST /v1/facts/batch` (default 20 × 100): facts/s and
p50/p95/p99 per batch. `--concurrency C` spreads each phase over C threads (one client
each). Every fact is new (its own content), so each request really writes. See
bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import httpx  # noqa: E402

from bench._stats import percentile  # noqa: E402
from memoryhub.client import MemoryHub, MemoryHubError  # noqa: E402


def fact_body(run: str, index: int, participants: int) -> dict:
    return {
        "type": "bench.note",
        "content": {"text": f"bench {run} fact {index}: customer prefers spare parts shipped by courier."},
        "scope": {"participantId": f"bench-{index % participants}"},
    }


def run_phase(
    name: str, count: int, concurrency: int, make_client: Callable[[], MemoryHub], call: Callable[[MemoryHub, int], None]
) -> dict:
    """Run `call(client, i)` for i in range(count) over `concurrency` threads; time each call."""
    latencies: list[float] = []
    errors: dict[str, int] = {}
    lock = threading.Lock()
    local = threading.local()
    clients: list[MemoryHub] = []

    def one(index: int) -> None:
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = make_client()
            with lock:
                clients.append(client)
        started = time.perf_counter()
        try:
            call(client, index)
        except MemoryHubError as exc:
            with lock:
                errors[exc.code] = errors.get(exc.code, 0) + 1
            return
        elapsed = time.perf_counter() - started
        with lock:
            latencies.append(elapsed)

    started = time.perf_counter()
    if concurrency <= 1:
        for index in range(count):
            one(index)
    else:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=name) as pool:
            list(pool.map(one, range(count)))
    wall = time.perf_counter() - started
    for client in clients:
        client.close()
    return {"requests": count, "ok": len(latencies), "errors": errors, "wall_s": wall, "latencies_s": latencies}


def summarize(result: dict, facts_per_request: int) -> dict:
    lat = result["latencies_s"]
    out = {
        "requests": result["requests"],
        "ok": result["ok"],
        "errors": result["errors"],
        "wall_s": round(result["wall_s"], 3),
        "facts_per_s": round(result["ok"] * facts_per_request / result["wall_s"], 1) if result["wall_s"] else 0.0,
        "requests_per_s": round(result["ok"] / result["wall_s"], 1) if result["wall_s"] else 0.0,
    }
    if lat:
        for pct in (50, 95, 99):
            out[f"p{pct}_ms"] = round(percentile(lat, pct) * 1000, 1)
        out["max_ms"] = round(max(lat) * 1000, 1)
        out["mean_ms"] = round(sum(lat) / len(lat) * 1000, 1)
    return out


def print_phase(title: str, summary: dict, unit: str) -> None:
    print(f"\n{title}")
    plural = {"batch": "batches"}.get(unit, unit + "s")
    print(f"  {summary['ok']}/{summary['requests']} {plural} ok in {summary['wall_s']:.2f} s")
    if "p50_ms" in summary:
        print(
            f"  latency per {unit}: "
            f"p50 {summary['p50_ms']:.1f} ms   p95 {summary['p95_ms']:.1f} ms   p99 {summary['p99_ms']:.1f} ms   "
            f"max {summary['max_ms']:.1f} ms"
        )
    print(f"  throughput: {summary['facts_per_s']:.1f} facts/s  ({summary['requests_per_s']:.1f} requests/s)")
    if summary["errors"]:
        print(f"  errors: {', '.join(f'{code} × {n}' for code, n in sorted(summary['errors'].items()))}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark fact writes against a running memoryhub server.")
    parser.add_argument("--url", default=os.environ.get("MEMORYHUB_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--api-key", default=os.environ.get("MEMORYHUB_API_KEY"), help="a write key (default $MEMORYHUB_API_KEY)")
    parser.add_argument("--writes", type=int, default=500, help="single writes (default 500)")
    parser.add_argument("--batches", type=int, default=20, help="batched writes (default 20)")
    parser.add_argument("--batch-size", type=int, default=100, help="facts per batch, up to 1000 (default 100)")
    parser.add_argument("--concurrency", type=int, default=1, help="client threads (default 1)")
    parser.add_argument("--participants", type=int, default=50, help="spread facts over this many participantIds")
    parser.add_argument("--warmup", type=int, default=10, help="untimed writes first (default 10)")
    parser.add_argument(
        "--fresh-connections", action="store_true",
        help="a new TCP connection per request (no keep-alive); see bench/README.md on runserver's keep-alive delay",
    )
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = parser.parse_args(argv)
    if not args.api_key:
        parser.error("no API key: pass --api-key or set MEMORYHUB_API_KEY (`make run` prints a `Write key:`)")
    if not 1 <= args.batch_size <= 1000:
        parser.error("--batch-size must be 1 to 1000")

    def make_client() -> MemoryHub:
        transport = httpx.HTTPTransport(limits=httpx.Limits(max_keepalive_connections=0)) if args.fresh_connections else None
        return MemoryHub(url=args.url, api_key=args.api_key, timeout=120, transport=transport)

    run = uuid.uuid4().hex[:8]
    try:
        with make_client() as hub:
            me = hub.me()
            if me["access"] != "write":
                print(f"error: this is a {me['access']} key; the benchmark needs a write key", file=sys.stderr)
                return 2
            for i in range(args.warmup):
                hub.facts_write(fact_body(run + "w", i, args.participants))
    except MemoryHubError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    print(f"memoryhub write benchmark against {args.url}")
    connections = "a new connection per request" if args.fresh_connections else "keep-alive"
    print(f"  key: {me['access']} on {me['tenant']}/{me['project']}   run: {run}")
    print(f"  concurrency: {args.concurrency}   connections: {connections}")

    single = summarize(
        run_phase(
            "single", args.writes, args.concurrency, make_client,
            lambda hub, i: hub.facts_write(fact_body(run + "s", i, args.participants)),
        ),
        facts_per_request=1,
    )
    print_phase(f"Single writes: {args.writes} × POST /v1/facts", single, "write")

    size = args.batch_size
    batched = summarize(
        run_phase(
            "batch", args.batches, args.concurrency, make_client,
            lambda hub, b: hub.facts_write_batch([fact_body(run + "b", b * size + i, args.participants) for i in range(size)]),
        ),
        facts_per_request=size,
    )
    print_phase(f"Batched writes: {args.batches} × POST /v1/facts/batch of {size}", batched, "batch")
    if batched.get("p50_ms"):
        print(f"  per fact inside a batch: {batched['p50_ms'] / size:.2f} ms at p50")

    if args.json:
        print(json.dumps({"url": args.url, "concurrency": args.concurrency, "freshConnections": args.fresh_connections, "single": single, "batch": batched | {"size": size}}))
    failed = bool(single["errors"] or batched["errors"])
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
