"""The one JSON parser of every /v1 endpoint and of POST /mcp: DRF's, with its nesting bounded.

Python's json module recurses once per level: a body nested about a thousand levels deep
raised RecursionError (a 500, and on /mcp Django's HTML error page), and one a little
shallower got through only to overflow whatever walked it next. No valid request nests
anywhere near MAX_BODY_DEPTH (fact content may nest 32 levels), so deeper is refused as
a 400 before json.loads sees it: the brackets outside strings are counted in C (bytes
methods and itertools), not in a Python loop per character.
"""

from __future__ import annotations

import io
import re
from itertools import accumulate

from rest_framework import parsers

from memoryhub.errors import ValidationFailed

MAX_BODY_DEPTH = 100

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def json_depth_exceeds(raw: bytes, limit: int = MAX_BODY_DEPTH) -> bool:
    """Whether a JSON text nests more than `limit` containers deep (brackets in strings not counted)."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit


def _too_deep() -> ValidationFailed:
    message = f"the body nests deeper than {MAX_BODY_DEPTH} levels"
    return ValidationFailed(f"The body is refused: {message}.", errors={"body": [message]})


class JSONParser(parsers.JSONParser):
    """`application/json`, refused (400) when nested more than MAX_BODY_DEPTH levels."""

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        if json_depth_exceeds(raw):
            raise _too_deep()
        try:
            return super().parse(io.BytesIO(raw), media_type, parser_context)
        except RecursionError:  # a last guard; the count above refuses such bodies first
            raise _too_deep() from None
