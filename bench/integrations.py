"""What the framework adapters cost per call, against a running memoryhub (docs/integrations.md).

    .venv/bin/python bench/integrations.py --url http://127.0.0.1:8123 --api-key mh_…

1. Claude's memory tool (`POST /v1/memory-tool/{who}` through MemoryHubMemoryTool's client):
   `view /memories`, `view` of a topic file, `str_replace` of one line (a fact revision), and
   `insert` of a line (a new fact), on a folder of one person holding an index of `--lines`
   entries and a topic file of `--lines` lines (each edit re-reads and re-imports the file).
2. LangGraph's store (MemoryHubStore, participant_label=1) over one person's `--lines` items:
   `put` (a new revision), `get`, `search` of the person's prefix with a filter, and `search`
   with a natural-language query (memoryhub's retrieval).

Prints p50/p95/max per operation (milliseconds) for `--rounds` timed calls after 3 untimed ones.
Needs `pip install -e '.[integrations]'`. Each run uses a fresh participant, so runs do not
disturb each other.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memoryhub.client import MemoryHub  # noqa: E402


def figures(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered) * 1000, 1), "p95": round(p95 * 1000, 1), "max": round(ordered[-1] * 1000, 1)}


def timed(rounds: int, call) -> dict[str, float]:
    for i in range(3):
        call(-1 - i)
    samples = []
    for i in range(rounds):
        start = time.perf_counter()
        call(i)
        samples.append(time.perf_counter() - start)
    return figures(samples)


def memory_tool(hub: MemoryHub, lines: int, rounds: int) -> dict[str, dict]:
    from memoryhub.integrations.claude import MemoryHubMemoryTool

    tool = MemoryHubMemoryTool(hub, f"bench-{uuid.uuid4().hex[:8]}")
    topic = "---\ntype: project\n---\n\n# Project Conventions\n\n" + "".join(f"- Convention {n}: use tool {n}\n" for n in range(lines))
    index = "# Memory Index\n\n## Project\n" + "".join(f"- [project] Convention {n} → project-conventions.md\n" for n in range(lines))
    tool.call({"command": "create", "path": "/memories/project-conventions.md", "file_text": topic})
    tool.call({"command": "create", "path": "/memories/MEMORY.md", "file_text": index})
    path = "/memories/project-conventions.md"
    state = {"calls": 0}

    def replace(i: int) -> None:  # toggles a line between two texts: each call is a revision
        n, second = (state["calls"] // 2) % lines, state["calls"] % 2
        old, new = (f"use tool {n}\n", f"use tool {n}b\n") if not second else (f"use tool {n}b\n", f"use tool {n}\n")
        tool.call({"command": "str_replace", "path": path, "old_str": old, "new_str": new})
        state["calls"] += 1

    return {
        "view /memories": timed(rounds, lambda i: tool.call({"command": "view", "path": "/memories"})),
        "view file": timed(rounds, lambda i: tool.call({"command": "view", "path": path})),
        "str_replace": timed(rounds, replace),
        "insert": timed(rounds, lambda i: tool.call({"command": "insert", "path": path, "insert_line": 7,
                                                     "insert_text": f"- Inserted note {i}"})),
    }


def store(hub: MemoryHub, lines: int, rounds: int) -> dict[str, dict]:
    from memoryhub.integrations.langgraph import MemoryHubStore

    memories = MemoryHubStore(hub, participant_label=1)
    person = ("memories", f"bench-{uuid.uuid4().hex[:8]}")
    for n in range(lines):
        memories.put(person, f"k{n}", {"text": f"Preference {n}: likes option {n}", "n": n})
    return {
        "put": timed(rounds, lambda i: memories.put(person, f"k{i % lines}", {"text": f"Preference {i}: changed", "n": i})),
        "get": timed(rounds, lambda i: memories.get(person, f"k{i % lines}")),
        "search (filter)": timed(rounds, lambda i: memories.search(person, filter={"n": {"$gte": lines // 2}}, limit=10)),
        "search (query)": timed(rounds, lambda i: memories.search(person, query=f"option {i % lines}", limit=5)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url")
    parser.add_argument("--api-key")
    parser.add_argument("--lines", type=int, default=50, help="index entries and topic lines / store items (default 50)")
    parser.add_argument("--rounds", type=int, default=30, help="timed calls per operation (default 30)")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = parser.parse_args(argv)
    with MemoryHub(args.url, args.api_key) as hub:
        results = {"memory tool": memory_tool(hub, args.lines, args.rounds), "langgraph store": store(hub, args.lines, args.rounds)}
    print(f"{args.rounds} timed calls each; {args.lines} lines/items; milliseconds")
    for group, operations in results.items():
        print(f"\n{group}")
        for name, values in operations.items():
            print(f"  {name:<16} p50 {values['p50']:>7}  p95 {values['p95']:>7}  max {values['max']:>7}")
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
