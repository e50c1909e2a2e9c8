"""A one-line progress report for long commands, on a terminal only.

    with Progress("backfill") as progress:
        for ...:
            progress.update(done, total=total, note="facts")

It redraws one line on stderr (`\\r`), at most ten times a second, and clears it at the
end, so the command's own output (one JSON line on stdout) stays as it was. Nothing is
written when stderr is not a terminal or in CI (`CI=true`): logs and pipes stay clean.
Imports nothing from Django (the `memoryhub` CLI uses it too).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

REDRAW_SECONDS = 0.1


def wanted(stream: TextIO) -> bool:
    """Show progress on this stream? A terminal, and not CI."""
    if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Progress:
    """One redrawn line `what: done/total (pct%) note, elapsed`; silent where `wanted` says no."""

    def __init__(self, what: str, *, stream: TextIO | None = None):
        self.what = what
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = wanted(self.stream)
        self.started = time.monotonic()
        self._drawn_at = 0.0
        self._width = 0

    def update(self, done: int, *, total: int | None = None, note: str = "", force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._drawn_at < REDRAW_SECONDS:
            return
        self._drawn_at = now
        count = f"{done:,}/{total:,} ({100 * done // total if total else 100}%)" if total is not None else f"{done:,}"
        line = f"{self.what}: {count}{' ' + note if note else ''}, {now - self.started:.0f}s"
        self.stream.write("\r" + line.ljust(self._width))
        self.stream.flush()
        self._width = len(line)

    def say(self, text: str) -> None:
        """A line of its own in place of the count (e.g. `sending 120 files…`)."""
        if not self.enabled:
            return
        line = f"{self.what}: {text}"
        self.stream.write("\r" + line.ljust(self._width))
        self.stream.flush()
        self._width = len(line)

    def close(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
