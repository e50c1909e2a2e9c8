"""Train the memory gate's intent classifier: `python -m approvals.intent_train`.

Reads tests/data/gate/corpus.jsonl (built by bench/gate_corpus.py), fits two models on the
train and dev splits: the word model on hashed n-gram features (approvals.intent.features of
the normalised text), the sentence model on the local model's passage vectors of the texts
(approvals.intent.passage_vectors; about fifteen minutes on two cores the first time, then
read from `--vector-cache`); and writes approvals/intent_model.npz. The `test` split is
never read here. Deterministic: the same corpus and vector cache give the same weights, byte
for byte (vectors made afresh may differ in their last digits, and the weights with them).

Fitting: full-batch Adam on the class-balanced log loss with an L2 penalty, numpy only: a
logistic regression on the words, a network of one hidden layer on the vectors. The gate's
logit is a weighted average of the two (`--mix`, the network's share: 0.4). The thresholds
are read off out-of-fold scores (5 folds; a fold holds out whole template families and whole
authors, so each score comes from a model that never saw its family or its author): by
default the lowest at which the whole gate (hard rules + classifier) holds at most
`--max-benign` (5%) of the benign texts, once for both models and once for the word model
alone (MEMORYHUB_GATE_VECTORS=off); `--recall R` picks instead the highest at which it holds
R of the poisoning texts.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np

from approvals.intent import DIMENSIONS, MODEL_PATH, VECTOR_MODEL, VECTOR_SCALE, features, passage_vectors

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "gate" / "corpus.jsonl"


def load_corpus(path: Path = CORPUS) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def matrix(texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR arrays (indptr, indices, values) of the texts' features."""
    from approvals.rules import normalise

    indptr, indices, values = [0], [], []
    for text in texts:
        idx, val, _ = features(normalise(text))
        indices.append(idx)
        values.append(val)
        indptr.append(indptr[-1] + len(idx))
    return np.array(indptr), np.concatenate(indices), np.concatenate(values).astype(np.float64)


def _logits(w: np.ndarray, b: float, indptr, indices, values) -> np.ndarray:
    products = w[indices] * values
    sums = np.add.reduceat(products, indptr[:-1]) if len(products) else np.zeros(len(indptr) - 1)
    sums[np.diff(indptr) == 0] = 0.0
    return sums + b


def fit(indptr, indices, values, y: np.ndarray, *, l2: float, epochs: int, rate: float) -> tuple[np.ndarray, float]:
    n = len(y)
    positive = y.mean()
    sample_weight = np.where(y == 1, 0.5 / positive, 0.5 / (1 - positive)) / n
    rows = np.repeat(np.arange(n), np.diff(indptr))
    w = np.zeros(DIMENSIONS)
    b = 0.0
    m_w, v_w = np.zeros(DIMENSIONS), np.zeros(DIMENSIONS)
    m_b = v_b = 0.0
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    for step in range(1, epochs + 1):
        p = 1.0 / (1.0 + np.exp(-_logits(w, b, indptr, indices, values)))
        g_rows = (p - y) * sample_weight
        g_w = np.bincount(indices, weights=g_rows[rows] * values, minlength=DIMENSIONS) + l2 * w
        g_b = g_rows.sum()
        m_w = beta1 * m_w + (1 - beta1) * g_w
        v_w = beta2 * v_w + (1 - beta2) * g_w * g_w
        m_b = beta1 * m_b + (1 - beta1) * g_b
        v_b = beta2 * v_b + (1 - beta2) * g_b * g_b
        w -= rate * (m_w / (1 - beta1 ** step)) / (np.sqrt(v_w / (1 - beta2 ** step)) + eps)
        b -= rate * (m_b / (1 - beta1 ** step)) / (np.sqrt(v_b / (1 - beta2 ** step)) + eps)
    return w, b


def vectors_of(texts: list[str], cache: Path | None) -> np.ndarray:
    """The texts' passage vectors (approvals.intent.passage_vectors), those made before read
    from `cache` (a file per model, keyed by the text's hash), the rest made and added."""
    keys = [hashlib.sha256(text.encode("utf-8")).hexdigest()[:32] for text in texts]
    known: dict[str, np.ndarray] = {}
    path = cache / f"{VECTOR_MODEL.replace('/', '_')}.npz" if cache else None
    if path is not None and path.exists():
        data = np.load(path)
        known = dict(zip(data["keys"].tolist(), data["vectors"]))
    missing = sorted({key: text for key, text in zip(keys, texts) if key not in known}.items())
    for start in range(0, len(missing), 64):
        chunk = missing[start:start + 64]
        for (key, _), vector in zip(chunk, passage_vectors([text for _, text in chunk])):
            known[key] = vector
    if path is not None and missing:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, keys=np.array(sorted(known)), vectors=np.array([known[k] for k in sorted(known)], np.float32))
    return np.array([known[key] for key in keys], np.float64)


def fit_vectors(X: np.ndarray, y: np.ndarray, *, hidden: int = 256, epochs: int = 300, rate: float = 3e-3,
                l2: float = 1e-4, seed: int = 0) -> dict[str, np.ndarray]:
    """The sentence model: one hidden layer of `hidden` rectified units on (X - mean) *
    VECTOR_SCALE, fitted by full-batch Adam on the class-balanced log loss; seeded, so the
    same vectors give the same weights."""
    rng = np.random.default_rng(seed)
    mean = X.mean(0)
    Z = (X - mean) * VECTOR_SCALE
    params = {
        "w1": rng.standard_normal((X.shape[1], hidden)) * np.sqrt(2 / X.shape[1]), "b1": np.zeros(hidden),
        "w2": rng.standard_normal(hidden) * np.sqrt(1 / hidden), "b2": np.zeros(1),
    }
    sample_weight = np.where(y == 1, 0.5 / y.mean(), 0.5 / (1 - y.mean())) / len(y)
    moments = {name: (np.zeros_like(value), np.zeros_like(value)) for name, value in params.items()}
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    for step in range(1, epochs + 1):
        h = np.maximum(Z @ params["w1"] + params["b1"], 0)
        g = (1.0 / (1.0 + np.exp(-(h @ params["w2"] + params["b2"][0]))) - y) * sample_weight
        gh = np.outer(g, params["w2"]) * (h > 0)
        grads = {"w1": Z.T @ gh + l2 * params["w1"], "b1": gh.sum(0), "w2": h.T @ g + l2 * params["w2"], "b2": np.array([g.sum()])}
        for name, grad in grads.items():
            m, v = moments[name]
            m[:] = beta1 * m + (1 - beta1) * grad
            v[:] = beta2 * v + (1 - beta2) * grad * grad
            params[name] -= rate * (m / (1 - beta1 ** step)) / (np.sqrt(v / (1 - beta2 ** step)) + eps)
    return {**params, "mean": mean}


def vector_logits(params: dict[str, np.ndarray], X: np.ndarray) -> np.ndarray:
    h = np.maximum((X - params["mean"]) * VECTOR_SCALE @ params["w1"] + params["b1"], 0)
    return h @ params["w2"] + params["b2"][0]


def probabilities(w, b, texts: list[str]) -> np.ndarray:
    indptr, indices, values = matrix(texts)
    return 1.0 / (1.0 + np.exp(-_logits(w, b, indptr, indices, values)))


# The thresholds a run may choose from, highest first.
THRESHOLDS = np.round(np.arange(0.95, 0.049, -0.01), 2)


def choose_threshold(p: np.ndarray, y: np.ndarray, ruled: np.ndarray, *, recall: float) -> float:
    """The highest threshold at which rules + classifier hold `recall` of the poisoning texts."""
    for threshold in THRESHOLDS:
        held = ruled | (p >= threshold)
        if held[y == 1].mean() >= recall:
            return float(threshold)
    return 0.05


def _unit(row: dict) -> str:
    """What a fold keeps together: a whole author's texts, else a family (one set of templates)."""
    source = row.get("source", "")
    return source if source.startswith("author-") else row["family"]


def threshold_for_benign(p: np.ndarray, y: np.ndarray, ruled: np.ndarray, *, benign: float) -> float:
    """The lowest threshold at which rules + classifier hold at most `benign` of the benign texts."""
    chosen = 0.95
    for threshold in THRESHOLDS:
        held = ruled | (p >= threshold)
        if held[y == 0].mean() > benign:
            break
        chosen = float(threshold)
    return chosen


def folds_by_family(rows: list[dict], k: int) -> list[int]:
    """Fold of each row: whole families (and whole authors) go together, spread so each fold
    gets some of each category; the authors are dealt round the folds in order of their hash."""
    hashed = lambda n: hashlib.sha256(n.encode()).hexdigest()  # noqa: E731
    fold_of: dict[str, int] = {}
    authors = sorted({_unit(r) for r in rows if _unit(r) != r["family"]}, key=hashed)
    for i, author in enumerate(authors):
        fold_of[author] = i % k
    by_category: dict[str, list[str]] = {}
    for row in rows:
        if _unit(row) == row["family"]:
            names = by_category.setdefault(row["category"], [])
            if row["family"] not in names:
                names.append(row["family"])
    offset = 0
    for category in sorted(by_category):
        for i, name in enumerate(sorted(by_category[category], key=hashed)):
            fold_of[name] = (offset + i) % k
        offset += len(by_category[category])
    return [fold_of[_unit(row)] for row in rows]


def out_of_fold(csr, X: np.ndarray, y: np.ndarray, folds: np.ndarray, *, l2: float = 3e-6, epochs: int = 150,
                rate: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """The word model's and the network's logits for each text, each from models fitted on the
    other folds (`folds`: folds_by_family), so every score is for an author or family unseen."""
    words, network = np.zeros(len(y)), np.zeros(len(y))
    for fold in np.unique(folds):
        inside, outside = np.flatnonzero(folds != fold), np.flatnonzero(folds == fold)
        w, b = fit(*_subset(*csr, inside), y[inside], l2=l2, epochs=epochs, rate=rate)
        words[outside] = _logits(w, b, *_subset(*csr, outside))
        network[outside] = vector_logits(fit_vectors(X[inside], y[inside]), X[outside])
    return words, network


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--l2", type=float, default=3e-6)
    parser.add_argument("--epochs", type=int, default=150)
    parser.add_argument("--rate", type=float, default=0.05)
    parser.add_argument("--recall", type=float, default=None,
                        help="choose the threshold that holds this share of poisoning out of fold instead")
    parser.add_argument("--max-benign", type=float, default=0.05,
                        help="the threshold: the lowest that holds at most this share of benign texts out of fold")
    parser.add_argument("--mix", type=float, default=0.4, help="the sentence model's share of the gate's logit")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--vector-cache", type=Path, default=Path("/tmp/memoryhub-gate-vectors"),
                        help="where the corpus's passage vectors are kept between runs")
    parser.add_argument("--out", type=Path, default=MODEL_PATH)
    args = parser.parse_args(argv)

    from approvals.rules import hard_reasons

    rows = [r for r in load_corpus() if r["split"] in {"train", "dev"}]  # never the test split
    texts = [r["text"] for r in rows]
    y = np.array([r["label"] == "hold" for r in rows], dtype=np.float64)
    indptr, indices, values = matrix(texts)
    X = vectors_of(texts, args.vector_cache)
    ruled = np.array([bool(hard_reasons(text)) for text in texts])

    # Out-of-fold logits, whole families held out together: the thresholds are chosen on
    # texts whose family the model did not see, as the gate meets them.
    folds = np.array(folds_by_family(rows, args.folds))
    text_oof, vector_oof = out_of_fold((indptr, indices, values), X, y, folds, l2=args.l2, epochs=args.epochs, rate=args.rate)
    # The thresholds are read off the corpus's own families; the legacy corpora are one family
    # each, older than this policy (they hold a few language preferences as poisoning).
    scored = np.array([r["category"] != "legacy" for r in rows])
    poison, benign = (y == 1) & scored, (y == 0) & scored
    print(f"{len(rows)} texts (train + dev), {args.folds} folds by family")
    thresholds = {}
    for name, logit in (("words and vectors", (1 - args.mix) * text_oof + args.mix * vector_oof), ("words alone", text_oof)):
        oof = 1.0 / (1.0 + np.exp(-logit))
        if args.recall is not None:
            threshold = choose_threshold(oof[scored], (y == 1)[scored], ruled[scored], recall=args.recall)
        else:
            threshold = threshold_for_benign(oof[scored], (y == 1)[scored], ruled[scored], benign=args.max_benign)
        thresholds[name] = threshold
        held = ruled | (oof >= threshold)
        print(f"{name}: threshold {threshold}; out of fold: poisoning held {held[poison].mean():.3f} "
              f"({held[poison].sum()}/{poison.sum()}), benign held {held[benign].mean():.3f} ({held[benign].sum()}/{benign.sum()})")
        for target in (0.99, 0.98, 0.95, 0.9):
            t = choose_threshold(oof[scored], (y == 1)[scored], ruled[scored], recall=target)
            print(f"  at {target:.0%} recall: threshold {t:.2f}, benign held {(ruled | (oof >= t))[benign].mean():.3f}")

    w, b = fit(indptr, indices, values, y, l2=args.l2, epochs=args.epochs, rate=args.rate)
    sentences = fit_vectors(X, y)
    nonzero = np.flatnonzero(np.abs(w) > 1e-6)
    corpus_hash = hashlib.sha256(CORPUS.read_bytes()).hexdigest()[:16]
    np.savez_compressed(
        args.out, indices=nonzero.astype(np.int32), values=w[nonzero].astype(np.float32), bias=np.float64(b),
        threshold=np.float64(thresholds["words and vectors"]), text_threshold=np.float64(thresholds["words alone"]),
        **{f"vector_{name}": value.astype(np.float32) for name, value in sentences.items()},
        mix=np.float64(args.mix), vector_model=VECTOR_MODEL, corpus=corpus_hash,
        params=json.dumps({"l2": args.l2, "epochs": args.epochs, "rate": args.rate, "recall": args.recall, "max_benign": args.max_benign,
                           "folds": args.folds, "mix": args.mix}),
    )
    print(f"wrote {args.out} ({len(nonzero)} weights, corpus {corpus_hash})")


def _subset(indptr, indices, values, rows: np.ndarray):
    starts, ends = indptr[rows], indptr[rows + 1]
    take = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends)]) if len(rows) else np.zeros(0, np.int64)
    sub_indptr = np.concatenate([[0], np.cumsum(ends - starts)])
    return sub_indptr, indices[take], values[take]


if __name__ == "__main__":
    main()
