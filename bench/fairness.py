"""One tenant must not stall another: a light tenant's hybrid reads, alone and while a
heavy tenant bulk-writes big batches, on the `make run` server with the local model.

    .venv/bin/python bench/fairness.py [--reads 40] [--batches 4] [--batch-size 40] [--chars 7000]

Starts `manage.py serve` on a throwaway data folder (its own embedded PostgreSQL; or
`--root` another checkout, to compare), makes two tenants, gives the light one
`--seed` short facts, then:

1. the light tenant alone: `--reads` hybrid reads (`mode: both`), each with a question of
   its own (so each embeds its query), one after another: p50/p95/max;
2. the same reads while the heavy tenant posts batches of `--batch-size` facts of
   `--chars` characters back to back (at least `--batches`, and on until the reads end,
   up to `--max-batches`), each batch then embedded in the background: the light
   tenant's hybrid p50/p95/max, /healthz p50/p95/max between reads, the heavy batches'
   own latency;
3. SIGTERM with that embedding still in flight: how long the server took to stop, and
   how many facts were embedded while it ran (the rest is left to the backfill job).

Prints the load average before and after: the figures depend on what else the machine
runs. Nothing is asserted (tests/test_fairness.py asserts that reads complete).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._stats import percentile  # noqa: E402

WORDS = ("memory tenant batch window anchor harbour lantern orchard quarry ribbon saddle timber velvet walnut "
         "courier invoice meeting garden engine ticket spare parts weekly report budget office").split()


def figures(name: str, seconds: list[float]) -> str:
    ms = [s * 1000 for s in seconds]
    return f"{name:<38} n={len(ms):<4} p50 {percentile(ms, 50):8.1f} ms  p95 {percentile(ms, 95):8.1f} ms  max {max(ms):8.1f} ms"


def text(rng: random.Random, chars: int) -> str:
    out, size = [], 0
    while size < chars:
        word = rng.choice(WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:chars]


def embedded_facts(data: Path) -> int:
    """Facts the server has embedded so far (its log's "embedded N of M Fact rows" lines)."""
    lines = (data / "serve.log").read_text().splitlines()
    return sum(int(line.split("embedded ")[1].split(" of")[0]) for line in lines if "embedded " in line and " Fact rows" in line)


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def start_server(root: Path, python: str, port: int, data: Path) -> tuple[subprocess.Popen, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    env |= {"MEMORYHUB_DATA_DIR": str(data), "PORT": str(port), "MEMORYHUB_EMBEDDINGS": "local", "MEMORYHUB_RATE_LIMIT": ""}
    log = (data / "serve.log").open("w")
    proc = subprocess.Popen([python, "manage.py", "serve"], cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/readyz", timeout=2).status_code == 200:
                return proc, base
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGKILL)
    raise SystemExit("the server never became ready; see " + str(data / "serve.log"))


def bootstrap(root: Path, python: str, data: Path, tenant: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    env |= {"MEMORYHUB_DATA_DIR": str(data)}
    done = subprocess.run([python, "manage.py", "bootstrap", "--tenant", tenant, "--project", "p", "--user", tenant],
                          cwd=root, env=env, capture_output=True, text=True, timeout=240, check=True)
    return json.loads(done.stdout)["apiKey"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reads", type=int, default=40)
    parser.add_argument("--batches", type=int, default=4, help="heavy batches at least")
    parser.add_argument("--max-batches", type=int, default=50, help="heavy batches at most (it goes on while the reads do)")
    parser.add_argument("--batch-size", type=int, default=40)
    parser.add_argument("--chars", type=int, default=7000)
    parser.add_argument("--seed", type=int, default=100, help="short facts of the light tenant")
    parser.add_argument("--port", type=int, default=8431)
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose server runs (compare with another)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds a request may take before it counts as failed")
    args = parser.parse_args()
    python = str(args.root / ".venv/bin/python") if (args.root / ".venv/bin/python").exists() else sys.executable
    rng = random.Random(17)
    print(f"checkout {args.root}; load average before: {loadavg()} ({os.cpu_count()} cores)")

    with tempfile.TemporaryDirectory(prefix="memoryhub-fairness-") as folder:
        data = Path(folder)
        proc, base = start_server(args.root, python, args.port, data)
        try:
            heavy = {"Authorization": f"Bearer {bootstrap(args.root, python, data, 'heavy')}"}
            light = {"Authorization": f"Bearer {bootstrap(args.root, python, data, 'light')}"}
            http = httpx.Client(base_url=base, timeout=args.timeout)
            seeded = http.post("/v1/facts/batch", headers=light,
                               json={"facts": [{"type": "light.note", "content": text(rng, 120)} for _ in range(args.seed)]})
            seeded.raise_for_status()
            deadline = time.monotonic() + 600
            while embedded_facts(data) < args.seed and time.monotonic() < deadline:
                time.sleep(0.5)  # "alone" means alone: its own embeddings are done first

            failures: list[str] = []

            def hybrid(i: int) -> float:
                body = {"query": f"{text(rng, 40)} {i}", "intents": [{"scope": "same-project", "mode": "both", "match": "any"}]}
                began = time.perf_counter()
                try:
                    http.post("/v1/retrieve", headers=light, json=body).raise_for_status()
                except httpx.HTTPError as exc:
                    failures.append(f"light hybrid read: {exc!r}")
                return time.perf_counter() - began

            def healthz() -> float:
                began = time.perf_counter()
                try:
                    http.get("/healthz").raise_for_status()
                except httpx.HTTPError as exc:
                    failures.append(f"/healthz: {exc!r}")
                return time.perf_counter() - began

            for i in range(3):  # warm up
                hybrid(-i)
            alone = [hybrid(i) for i in range(args.reads)]
            print(figures("light hybrid, alone", alone))

            batch_seconds: list[float] = []

            reads_done = threading.Event()

            def bulk_write() -> None:
                with httpx.Client(base_url=base, timeout=args.timeout) as writer:
                    while len(batch_seconds) < args.batches or (not reads_done.is_set() and len(batch_seconds) < args.max_batches):
                        body = {"facts": [{"type": "heavy.note", "content": text(rng, args.chars)} for _ in range(args.batch_size)]}
                        began = time.perf_counter()
                        try:
                            response = writer.post("/v1/facts/batch", headers=heavy, json=body)
                            response.raise_for_status()
                        except httpx.HTTPError as exc:
                            failures.append(f"heavy batch: {exc}")
                        batch_seconds.append(time.perf_counter() - began)

            writer = threading.Thread(target=bulk_write)
            writer.start()
            time.sleep(1.0)  # the first batch is in and its embedding has begun
            loaded, health = [], []
            for i in range(args.reads):
                loaded.append(hybrid(10_000 + i))
                health.append(healthz())
            reads_done.set()
            writer.join()
            print(figures("light hybrid, heavy tenant bulk-writing", loaded))
            print(figures("/healthz, heavy tenant bulk-writing", health))
            print(figures(f"heavy batch ({args.batch_size} x {args.chars} chars)", batch_seconds))
            print(f"heavy facts written: {len(batch_seconds) * args.batch_size}; load average now: {loadavg()}")
            if failures:
                print(f"failures ({len(failures)}; a failed request counts with the time it took):", *failures, sep="\n  ")
        finally:
            began = time.perf_counter()
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=120)
                print(f"SIGTERM with the heavy tenant's embedding in flight: stopped in {time.perf_counter() - began:.1f} s")
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                print("SIGTERM did not stop the server within 120 s (killed)")
            print(f"facts embedded while it ran (both tenants): {embedded_facts(data)}; "
                  f"interrupted at shutdown: {'yes' if 'interrupted' in (data / 'serve.log').read_text() else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
