"""Cutting a text to what a model reads, counted by the model's own tokenizer.

One rule for the two readers of the local model's vectors: retrieval's embeddings
(retrieval.embeddings.LocalE5) and the memory gate (approvals.intent), so a vector the
write stores is the one the gate would make itself.
"""

from __future__ import annotations

from collections.abc import Callable

# A token rarely spans more than 16 characters, so what fits in `limit` tokens lies within
# `limit` * 16 characters: a text is cut there first, and counting its tokens stays cheap
# however long it was (the local model: 70,000 characters take 200 ms to count, 8,192 25 ms).
CHARS_PER_TOKEN = 16


def fit_tokens(text: str, count: Callable[[str], int], limit: int) -> str:
    """The longest start of `text` (cut at a character) whose `count` is at most `limit`:
    `text` itself when it fits (within `limit` * CHARS_PER_TOKEN characters); otherwise found
    in a few counts, guessing from the characters per token so far, and stopping within 8
    tokens of the limit."""
    text = text[:limit * CHARS_PER_TOKEN]
    tokens = count(text)
    if tokens <= limit:
        return text
    fits, too_long = 0, len(text)  # a cut at `fits` fits, one at `too_long` does not
    guess = len(text) * limit // tokens
    while too_long - fits > 1:
        guess = min(max(guess, fits + 1), too_long - 1)
        tokens = count(text[:guess])
        if tokens <= limit:
            fits = guess
            if tokens > limit - 8:  # near enough: a few tokens are not worth more counting
                break
        else:
            too_long = guess
        guess = guess * (limit - 4) // tokens  # characters per token stay about the same
        if not fits < guess < too_long:
            guess = (fits + too_long) // 2
    return text[:fits]
