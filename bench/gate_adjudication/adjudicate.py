"""Are the gate's errors the model's, or the corpus's? A blind second reading of its mistakes.

The shipped gate's out-of-fold mistakes on train + dev (a benign text held, a poisoning text
remembered) are either texts the model reads wrongly or texts whose corpus label a careful
reader of the policy would not give. Independent judges, given only the policy (BRIEF.md,
the authors' own policy section) and never the corpus label, the category or the score,
label a sample of the mistakes mixed with a sample of texts the gate got right, two judges
to a text. The report says, per group, how often both judges agree with the corpus, both
read it the other way, or they split (or call it unclear), and what the out-of-fold figures
would be if the texts both judges read the other way were labelled as they read them.

    .venv/bin/python bench/gate_adjudication/adjudicate.py sample   # writes sample.jsonl and the judges' batches
    .venv/bin/python bench/gate_adjudication/adjudicate.py report   # reads sample.jsonl and judgments/

`sample` refits the shipped recipe out of fold (approvals.intent_train.out_of_fold: the
shipped folds, whole authors held out) and holds texts at the shipped threshold; the test
split is never read. The sample is drawn with a fixed seed; each third of it goes to two
judges, in their own order. The judges were model sessions, as the corpus's authors were,
each with its batch file and BRIEF.md only (docs/benchmarks.md, "Memory gate").
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

HERE = Path(__file__).resolve().parent
SAMPLE = HERE / "sample.jsonl"
JUDGMENTS = HERE / "judgments"
BATCHES = HERE / "batches"
THRESHOLD, MIX = 0.28, 0.4  # the shipped model's (approvals/intent_model.npz)
GROUPS = {  # name: (poisoning by the corpus label, held by the gate out of fold, how many to draw)
    "benign held by the classifier": (False, True, 120),
    "benign held by a hard rule": (False, True, 30),
    "poisoning remembered": (True, False, 150),
    "benign remembered": (False, False, 75),
    "poisoning held": (True, True, 75),
}
SEED = 20261206


def _out_of_fold() -> tuple[list[dict], dict[str, np.ndarray], np.ndarray]:
    from approvals.intent_train import folds_by_family, load_corpus, matrix, out_of_fold, vectors_of
    from approvals.rules import hard_reasons

    rows = [r for r in load_corpus() if r["split"] in {"train", "dev"}]  # never the test split
    texts = [r["text"] for r in rows]
    y = np.array([r["label"] == "hold" for r in rows])
    words, network = out_of_fold(matrix(texts), vectors_of(texts, Path("/tmp/memoryhub-gate-vectors")), y.astype(np.float64),
                                 np.array(folds_by_family(rows, 5)))
    p = 1 / (1 + np.exp(-((1 - MIX) * words + MIX * network)))
    ruled = np.array([bool(hard_reasons(t)) for t in texts])
    held = ruled | (p >= THRESHOLD)
    scored = np.array([r["category"] != "legacy" for r in rows])  # as the threshold rule counts
    groups = {
        "benign held by the classifier": scored & ~y & held & ~ruled,
        "benign held by a hard rule": scored & ~y & ruled,
        "poisoning remembered": scored & y & ~held,
        "benign remembered": scored & ~y & ~held,
        "poisoning held": scored & y & held,
    }
    return rows, groups, p


def command_sample() -> None:
    rows, groups, p = _out_of_fold()
    rng = random.Random(SEED)
    picked = []
    for name, (_, _, n) in GROUPS.items():
        members = np.flatnonzero(groups[name]).tolist()
        for i in rng.sample(members, min(n, len(members))):
            row = rows[i]
            picked.append({"id": hashlib.sha256(f"adj-{i}".encode()).hexdigest()[:10], "group": name, "population": len(members),
                           "label": row["label"], "category": row["category"], "source": row.get("source") or row["family"],
                           "score": round(float(p[i]), 3), "text": row["text"]})
    rng.shuffle(picked)
    BATCHES.mkdir(exist_ok=True)
    with SAMPLE.open("w", encoding="utf-8") as out:
        for item in picked:
            out.write(json.dumps(item, ensure_ascii=False) + "\n")
    for third in range(3):
        part = picked[third::3]
        for second in (0, 1):
            order = part[:]
            random.Random(10 * third + second).shuffle(order)
            with (BATCHES / f"batch-{2 * third + second + 1}.jsonl").open("w", encoding="utf-8") as out:  # what a judge sees: no label
                for item in order:
                    out.write(json.dumps({"id": item["id"], "text": item["text"]}, ensure_ascii=False) + "\n")
    print(f"{len(picked)} texts in {SAMPLE}; batches in {BATCHES}, two judges to a third")


def _wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    centre, spread = (k + z * z / 2) / (n + z * z), z * math.sqrt(k * (n - k) / n + z * z / 4) / (n + z * z)
    return max(0.0, centre - spread), min(1.0, centre + spread)


def _readings(sample: list[dict]) -> dict[str, list[str]]:
    readings: dict[str, list[str]] = {item["id"]: [] for item in sample}
    for path in sorted(JUDGMENTS.glob("judge-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                judged = json.loads(line)
                readings[judged["id"]].append(judged["label"])
    return readings


def _verdict(item: dict, labels: list[str]) -> str:
    """'agree' (both judges give the corpus label), 'opposite' (both give the other), else 'split'."""
    other = "remember" if item["label"] == "hold" else "hold"
    if len(labels) == 2 and labels[0] == labels[1] == item["label"]:
        return "agree"
    if len(labels) == 2 and labels[0] == labels[1] == other:
        return "opposite"
    return "split"


def command_report() -> None:
    sample = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    readings = _readings(sample)
    missing = [i for i, labels in readings.items() if len(labels) != 2]
    if missing:
        sys.exit(f"{len(missing)} texts do not have two judgments yet (e.g. {missing[:3]})")
    pairs = list(readings.values())
    both_definite = [(a, b) for a, b in pairs if "unclear" not in (a, b)]
    agree = sum(a == b for a, b in both_definite)
    p_hold = sum((a == "hold") + (b == "hold") for a, b in both_definite) / (2 * len(both_definite))
    chance = p_hold ** 2 + (1 - p_hold) ** 2
    pi = (agree / len(both_definite) - chance) / (1 - chance)  # Scott's pi: chance from the pooled label rates
    unclear = sum(label == "unclear" for labels in pairs for label in labels)
    print(f"{len(sample)} texts, two judges each; judges agree with each other on {agree}/{len(both_definite)} "
          f"texts both labelled (Scott's pi {pi:.2f}); {unclear} of {2 * len(sample)} readings 'unclear'\n")
    print(f"{'group (corpus label, gate out of fold)':34} {'sample':>6} {'of':>6}  {'both agree':>11}  {'both opposite':>20}  {'split/unclear':>13}")
    shares = {}
    for name in GROUPS:
        items = [item for item in sample if item["group"] == name]
        verdicts = [_verdict(item, readings[item["id"]]) for item in items]
        n, population = len(items), items[0]["population"] if items else 0
        counts = {v: verdicts.count(v) for v in ("agree", "opposite", "split")}
        low, high = _wilson(counts["opposite"], n)
        shares[name] = (population, {v: counts[v] / n for v in counts})
        print(f"{name:34} {n:>6} {population:>6}  {counts['agree']:>4} {counts['agree'] / n:>5.0%}  "
              f"{counts['opposite']:>4} {counts['opposite'] / n:>4.0%} [{low:.0%}–{high:.0%}]  {counts['split']:>5} {counts['split'] / n:>5.0%}")
    # The out-of-fold figures re-counted: texts both judges read the other way take that label;
    # split or unclear texts are left out; every group scaled from its sample to its population.
    held_poison = passed_poison = held_benign = passed_benign = contested = 0.0
    for name, (population, share) in shares.items():
        poisoning, held, _ = GROUPS[name]
        for verdict, fraction in share.items():
            count = population * fraction
            if verdict == "split":
                contested += count
                continue
            is_poison = poisoning if verdict == "agree" else not poisoning
            if is_poison:
                held_poison, passed_poison = held_poison + count * held, passed_poison + count * (not held)
            else:
                held_benign, passed_benign = held_benign + count * held, passed_benign + count * (not held)
    before_poison = sum(shares[g][0] for g, (poisoning, _, _) in GROUPS.items() if poisoning)
    before_benign = sum(shares[g][0] for g, (poisoning, _, _) in GROUPS.items() if not poisoning)
    held_before = sum(shares[g][0] for g, (poisoning, held, _) in GROUPS.items() if poisoning and held)
    benign_before = sum(shares[g][0] for g, (poisoning, held, _) in GROUPS.items() if not poisoning and held)
    print(f"\nout of fold at the shipped threshold, as the corpus labels them: poisoning held {held_before / before_poison:.1%}, "
          f"benign held {benign_before / before_benign:.1%}")
    print(f"re-counted by the judges (both agreeing; {contested:,.0f} contested texts left out): poisoning held "
          f"{held_poison / (held_poison + passed_poison):.1%}, benign held {held_benign / (held_benign + passed_benign):.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["sample", "report"])
    args = parser.parse_args()
    if args.command == "sample":
        import os

        import django

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")
        django.setup()
        command_sample()
    else:
        command_report()


if __name__ == "__main__":
    main()
