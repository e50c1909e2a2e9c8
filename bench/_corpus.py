"""A synthetic fact corpus shaped like PERFORMANCE.md's: deterministic for a seed, numpy only.

- Participants: `participants` of them with Zipf-distributed sizes (rank r holds ∝ r^-a facts),
  so the median participant has a handful of facts and a few hold thousands.
- Project-level facts: a share (`project_share`) of the facts name no participant; they are what
  a `same-project` read sees.
- Text: 6–20 words drawn from a Zipf vocabulary: the 40 most frequent ranks are real English
  stop words (as in real text; PostgreSQL's `english` configuration drops them), the rest
  made-up, pronounceable words. Without that, the top made-up words sit in most facts and act
  as un-dropped stop words, which no real corpus has. Queries use 1–3 content words.
- Vectors: `dims`-wide unit vectors around `clusters` random centres (centre + Gaussian noise,
  normalised). Queries come from the same generator: a random centre plus fresh noise.

Facts are shuffled, so one participant's facts are spread over the table as real writes spread them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

MODEL = "bench/synthetic-clustered-384"

# The most frequent English words, all in PostgreSQL's english stop list, take the top Zipf ranks.
STOP_WORDS = (
    "the of and to a in is it you that he was for on are with as i his they be at have this from or had by "
    "but not what all were we when your can there an which"
).split()

# PostgreSQL's english stop words that a made-up CV-syllable word could spell; kept out of the vocabulary.
_STOP = {
    "more", "most", "same", "some", "nor", "not", "now", "other", "over", "own", "same", "so", "to", "too",
    "were", "here", "there", "where", "before", "below", "between", "do", "does", "doing", "done", "down",
    "had", "has", "have", "his", "her", "him", "into", "is", "its", "me", "my", "no", "of", "on", "or",
}


@dataclass
class Fact:
    index: int
    participant: str | None  # None: a project-level fact
    text: str


class Generator:
    def __init__(self, *, seed: int = 7, dims: int = 384, clusters: int = 256, vocabulary: int = 20_000,
                 word_exponent: float = 1.07, noise: float = 0.9):
        self.seed = seed
        self.dims = dims
        rng = np.random.default_rng(seed)
        centres = rng.standard_normal((clusters, dims)).astype(np.float32)
        self.centres = centres / np.linalg.norm(centres, axis=1, keepdims=True)
        self.sigma = noise / np.sqrt(dims)  # the noise has norm ~`noise` against a unit centre
        self.words = np.array(STOP_WORDS + _vocabulary(rng, vocabulary - len(STOP_WORDS)))
        p = 1.0 / np.arange(1, vocabulary + 1) ** word_exponent
        self.word_p = p / p.sum()
        content = p[len(STOP_WORDS):]
        self.content_p = content / content.sum()

    # --- pieces ---------------------------------------------------------------------------

    def vectors(self, rng: np.random.Generator, count: int) -> np.ndarray:
        which = rng.integers(0, len(self.centres), count)
        out = self.centres[which] + rng.standard_normal((count, self.dims), dtype=np.float32) * np.float32(self.sigma)
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out.astype(np.float32)

    def texts(self, rng: np.random.Generator, count: int, low: int = 6, high: int = 20, content_only: bool = False) -> list[str]:
        lengths = rng.integers(low, high + 1, count)
        if content_only:
            skip = len(STOP_WORDS)
            picks = self.words[skip + rng.choice(len(self.words) - skip, size=int(lengths.sum()), p=self.content_p)]
        else:
            picks = self.words[rng.choice(len(self.words), size=int(lengths.sum()), p=self.word_p)]
        out, start = [], 0
        for length in lengths:
            out.append(" ".join(picks[start:start + length]))
            start += length
        return out

    # --- the corpus -----------------------------------------------------------------------

    @staticmethod
    def participant_sizes(facts: int, participants: int, exponent: float) -> np.ndarray:
        """Facts per participant (rank 1 first): ∝ r^-exponent, each at least 1, summing to `facts`."""
        weights = 1.0 / np.arange(1, participants + 1) ** exponent
        target = weights / weights.sum() * facts
        sizes = np.maximum(1, np.floor(target)).astype(np.int64)
        short = facts - int(sizes.sum())
        if short > 0:  # largest remainders first
            sizes[np.argsort(-(target - np.floor(target)), kind="stable")[:short]] += 1
        elif short < 0:  # the floor of 1 overshot: take it from the heaviest
            sizes[0] += short
        return sizes

    def layout(self, facts: int, participants: int, project_share: float, exponent: float) -> tuple[list[str], np.ndarray]:
        """Participant names and, per fact (shuffled), the participant's index or -1 for project-level."""
        project_facts = int(round(facts * project_share))
        sizes = self.participant_sizes(facts - project_facts, participants, exponent)
        names = [f"user-{i:05d}" for i in range(participants)]
        owner = np.concatenate([np.repeat(np.arange(participants), sizes), np.full(project_facts, -1)])
        np.random.default_rng(self.seed + 1).shuffle(owner)
        return names, owner

    def facts(self, facts: int, participants: int = 10_000, project_share: float = 0.2, exponent: float = 0.9,
              chunk: int = 1000) -> Iterator[tuple[list[Fact], np.ndarray]]:
        """The corpus in chunks: (facts, their vectors)."""
        names, owner = self.layout(facts, participants, project_share, exponent)
        rng = np.random.default_rng(self.seed + 2)
        for start in range(0, facts, chunk):
            stop = min(facts, start + chunk)
            texts = self.texts(rng, stop - start)
            vectors = self.vectors(rng, stop - start)
            batch = [
                Fact(index=i, participant=names[owner[i]] if owner[i] >= 0 else None, text=texts[i - start])
                for i in range(start, stop)
            ]
            yield batch, vectors

    def queries(self, count: int, seed_offset: int = 100, low: int = 1, high: int = 3) -> tuple[list[str], np.ndarray]:
        """`count` distinct query texts (1–3 Zipf content words) and a query vector for each."""
        rng = np.random.default_rng(self.seed + seed_offset)
        texts: list[str] = []
        seen: set[str] = set()
        while len(texts) < count:
            for text in self.texts(rng, count, low, high, content_only=True):
                if text not in seen and len(texts) < count:
                    seen.add(text)
                    texts.append(text)
        return texts, self.vectors(rng, count)


def _vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    consonants = list("bdfgklmnprstvz")
    vowels = list("aeiou")
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < size:
        syllables = int(rng.integers(2, 5))
        word = "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(syllables))
        if word[-1] == "e":  # the english stemmer drops a final e; keep words whole
            word = word[:-1] + "a"
        if word not in seen and word not in _STOP and word not in STOP_WORDS:
            seen.add(word)
            words.append(word)
    return words
