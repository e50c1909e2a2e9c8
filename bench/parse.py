"""What reading a request body costs: DRF's JSON parser with the NUL walk ApiView did
before issue 17, against core.parsers.JSONParser (nesting bounded; NUL and lone
surrogates refused, the body walked only when its text holds a \\u0000 or \\ud8xx-\\udfxx
escape). CPU time per body (process_time), p50 and p95 of 600 runs each.

    .venv/bin/python bench/parse.py
"""

from __future__ import annotations

import io
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")
os.environ.setdefault("DATABASE_URL", "postgres://unused@127.0.0.1:1/unused")  # nothing here connects

import django  # noqa: E402

django.setup()

from rest_framework.parsers import JSONParser as DRFParser  # noqa: E402

from core.parsers import JSONParser  # noqa: E402

RUNS = 600


def nul_walk_before(value, where=""):
    """ApiView's recursive NUL walk as it was (core/api.py `_nul_at`)."""
    if isinstance(value, str):
        return where if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            name = f"{where}.{key}" if where else str(key)
            if "\x00" in str(key):
                return name
            if found := nul_walk_before(item, name):
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            if found := nul_walk_before(item, f"{where}[{index}]"):
                return found
    return None


BODIES = {
    "one fact": {"type": "acme.note", "content": {"text": "x" * 900, "tags": ["a", "b"]}, "scope": {"participantId": "end-7"}},
    "50 messages": {"messages": [{"role": "user", "text": "hello there " * 20} for _ in range(50)]},
    "50 messages, \\u escapes": {"messages": [{"role": "user", "text": "caf\u00e9 \U0001F600 " * 20} for _ in range(50)]},
    "batch of 100 facts": {"facts": [{"type": "acme.note", "content": {"text": "y" * 200, "n": [1, 2, {"z": [3]}]}} for _ in range(100)]},
}


def measure(raw: bytes, parse) -> tuple[float, float]:
    times = []
    for _ in range(RUNS):
        started = time.process_time()
        parse(raw)
        times.append((time.process_time() - started) * 1e6)
    times.sort()
    return times[len(times) // 2], times[int(len(times) * 0.95)]


def main() -> None:
    before_parser, after_parser = DRFParser(), JSONParser()
    print(f"{'body':26} {'bytes':>7}   {'before p50/p95 µs':>18}   {'after p50/p95 µs':>17}")
    for name, body in BODIES.items():
        raw = json.dumps(body).encode()  # ensure_ascii: non-ASCII as \\u escapes, as Python clients send it
        before = measure(raw, lambda r: nul_walk_before(before_parser.parse(io.BytesIO(r), "application/json", {})))
        after = measure(raw, lambda r: after_parser.parse(io.BytesIO(r), "application/json", {}))
        print(f"{name:26} {len(raw):7,}   {before[0]:8.1f} / {before[1]:7.1f}   {after[0]:8.1f} / {after[1]:7.1f}")


if __name__ == "__main__":
    main()
