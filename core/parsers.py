"""The one JSON parser of every /v1 endpoint and of POST /mcp: DRF's, refusing with a 400
what would otherwise fail later with a 500.

- Nesting: Python's json module recurses once per level, so a body nested about a
  thousand levels deep raised RecursionError (a 500, and on /mcp Django's HTML error
  page), and one a little shallower got through only to overflow whatever walked it
  next. No valid request nests anywhere near MAX_BODY_DEPTH (fact content may nest 32
  levels), so deeper is refused before json.loads sees it: the brackets outside strings
  are counted in C (bytes methods and itertools), not in a Python loop per character.
- Characters PostgreSQL cannot store in text or jsonb: NUL, and half of a surrogate pair
  (JSON's `"\\ud800"` escape parses to a lone one, which UTF-8 cannot encode). Either can
  only arrive as a `\\u` escape (raw NUL is not JSON, raw surrogates are not UTF-8), so
  the parsed body of a UTF-8 text is walked for them only when it holds such an escape.

ApiView also refuses both characters in the path and the query (core.api), and the
dashboard in its URLs (dashboard.access).
"""

from __future__ import annotations

import io
import re
from itertools import accumulate, repeat

from rest_framework import parsers

from core.errors import ValidationFailed

MAX_BODY_DEPTH = 100

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_UNSTORABLE_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")


def json_depth_exceeds(raw: bytes, limit: int = MAX_BODY_DEPTH) -> bool:
    """Whether a JSON text nests more than `limit` containers deep (brackets in strings not counted)."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    # Outside strings: with no escaped quote, every other piece between quotes (split is
    # C-fast); else strings are cut out by a regex that knows escapes.
    outside = _STRING.sub(b"", raw) if b'\\"' in raw else b"".join(raw.split(b'"')[::2])
    brackets = outside.translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit


def _unstorable(text: str) -> str | None:
    """The first character of `text` PostgreSQL cannot store, if any. Plain `in`, isascii
    and encode run in C: a regex took 10 µs a string."""
    if "\x00" in text:
        return "\x00"
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return text[error.start]
    return None


def _field(parent: str, key: str | int | None) -> str:
    if key is None:
        return parent
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else str(key)


def unstorable_at(value, where: str = "") -> tuple[str, str] | None:
    """Where the first character PostgreSQL cannot store is in a parsed body
    (`messages[0].text`), and which it is; None when there is none. Walked without
    recursion; a name is made only for containers and the culprit."""
    stack: list[tuple[object, str, str | int | None]] = [(value, where, None)]
    while stack:
        item, parent, key = stack.pop()
        if isinstance(item, str):
            if char := _unstorable(item):
                return _field(parent, key), char
        elif isinstance(item, dict):
            at = _field(parent, key)
            for name in item:  # the keys, then the values
                if char := _unstorable(name):
                    return _field(at, name), char
            stack.extend(zip(reversed(item.values()), repeat(at), reversed(item.keys())))
        elif isinstance(item, list):
            at = _field(parent, key)
            stack.extend(zip(reversed(item), repeat(at), range(len(item) - 1, -1, -1)))
    return None


def refuse_unstorable(found: tuple[str, str] | None) -> None:
    """A 400 naming where the NUL or the lone surrogate is."""
    if found is None:
        return
    where, char = found
    # A key may hold it too: the name is written with escapes, as no answer can carry the character.
    where = "".join(f"\\u{ord(c):04x}" if _unstorable(c) else c for c in where) or "body"
    if char == "\x00":
        raise ValidationFailed(f"{where} may not contain NUL (\\u0000) characters.", errors={where: ["contains NUL (\\u0000)"]})
    code = f"\\u{ord(char):04x}"
    raise ValidationFailed(
        f"{where} contains a lone surrogate ({code}): text must be valid Unicode.", errors={where: [f"contains a lone surrogate ({code})"]}
    )


def _too_deep() -> ValidationFailed:
    message = f"the body nests deeper than {MAX_BODY_DEPTH} levels"
    return ValidationFailed(f"The body is refused: {message}.", errors={"body": [message]})


class JSONParser(parsers.JSONParser):
    """`application/json`, refused (400) when nested more than MAX_BODY_DEPTH levels or
    holding a character PostgreSQL cannot store."""

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        if json_depth_exceeds(raw):
            raise _too_deep()
        try:
            data = super().parse(io.BytesIO(raw), media_type, parser_context)
        except RecursionError:  # a last guard; the count above refuses such bodies first
            raise _too_deep() from None
        # NUL bytes: a UTF-16 or UTF-32 body, where escapes do not read as these bytes; walk it.
        if b"\x00" in raw or (b"\\u" in raw and _UNSTORABLE_ESCAPE.search(raw)):
            refuse_unstorable(unstorable_at(data))
        return data
