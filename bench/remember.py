"""Latency of the remember tool on a running memoryhub server, the memory gate included.

    .venv/bin/python bench/remember.py --api-key <write key> [--url http://127.0.0.1:8000] [--count 300]

Creates an agent that remembers per person (`bench.remember`, once), then sends `--count`
remember calls, one at a time on one keep-alive connection, each a different text of the
gate corpus's train split (tests/data/gate/corpus.jsonl, the test split never read; about
half of them poisoning, so held texts are timed too), and prints p50/p95/p99 in
milliseconds and how many were held. Run it against servers started with different
settings to see what a setting costs per `remember`: MEMORYHUB_GATE_VECTORS=on (the
default: the gate reads the vector the write makes) against off (the words alone), or
MEMORYHUB_EMBEDDINGS=none (the gate embeds the text itself). See docs/benchmarks.md
("Memory gate").
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

import httpx  # noqa: E402

from bench._stats import percentile  # noqa: E402

AGENT = {"slug": "bench.remember", "instructions": "You are a support desk assistant.",
         "retrieval": [{"types": ["bench.preference"], "scope": "same-user", "mode": "both", "limit": 5}],
         "memory": {"remember": {"types": ["bench.preference"], "scope": "same-user", "keepDays": 30}}}


def texts(count: int, seed: int) -> list[str]:
    rows = [json.loads(line) for line in (ROOT / "tests" / "data" / "gate" / "corpus.jsonl").open(encoding="utf-8")]
    pool = [r["text"][:2000] for r in rows if r["split"] == "train" and r["source"].startswith("author-")]
    return random.Random(seed).sample(pool, min(count, len(pool)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7, help="which corpus texts (same seed, same texts)")
    args = parser.parse_args()
    headers = {"Authorization": f"Bearer {args.api_key}"}
    with httpx.Client(base_url=args.url, headers=headers, timeout=60) as http:
        created = http.post("/v1/agents", json=AGENT)
        if created.status_code not in (201, 409):
            raise SystemExit(f"creating the agent: {created.status_code} {created.text[:200]}")
        run = f"{time.time():.0f}"
        timings, held = [], 0
        for index, text in enumerate(texts(args.count + 5, args.seed)):
            body = {"participantId": f"bench-{index % 20}", "runId": f"bench-{run}", "toolCallId": f"call-{index}",
                    "arguments": {"type": "bench.preference", "content": text}}
            started = time.perf_counter()
            response = http.post("/v1/agents/bench.remember/remember", json=body)
            elapsed = (time.perf_counter() - started) * 1000
            if response.status_code != 201:
                raise SystemExit(f"remember: {response.status_code} {response.text[:300]}")
            if index < 5:
                continue  # warm-up: the models load on the first calls
            timings.append(elapsed)
            held += response.json()["status"] == "pending-approval"
    print(f"remember, {len(timings)} calls one at a time ({held} held for review), load average {os.getloadavg()[0]:.1f}:")
    print(f"p50 {percentile(timings, 50):.1f} ms  p95 {percentile(timings, 95):.1f} ms  p99 {percentile(timings, 99):.1f} ms")


if __name__ == "__main__":
    main()
