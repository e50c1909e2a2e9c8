"""What a fact's content is made of: canonical JSON, its hash and size, its searchable text, its limits."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

MAX_CONTENT_BYTES = 64 * 1024
MAX_TEXT_BYTES = 16 * 1024
MAX_DEPTH = 32
# The type of a MEMORY.md folder's layout facts (profiles.markdown): bookkeeping of the
# folder's files, never a memory of its own, so no search returns them.
LAYOUT_TYPE = "memory.layout"

MAX_NAME_LENGTH = 200
# Types, keys and namespaces: letters, digits and a few separators, as in `acme.note`,
# `tool:read_file`, `preferred-order-communication`, `-home-me-project`.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.:@/+\-]{1,200}$")


def canonical_json(content: Any) -> bytes:
    """Sorted keys, no insignificant whitespace, UTF-8."""
    return json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def content_hash(canonical: bytes) -> str:
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def searchable_text(content: Any) -> str:
    """`content.text` when content is an object with text, else the string, else its scalar values joined."""
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return content["text"]
    if isinstance(content, str):
        return content
    parts: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif value is None:
            return
        elif isinstance(value, bool):
            parts.append("true" if value else "false")
        else:
            parts.append(str(value))

    walk(content)
    return " ".join(parts)


def depth(value: Any) -> int:
    """Nesting depth of JSON containers (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            deepest = max(deepest, level)
            continue
        deepest = max(deepest, level + 1)
        if level + 1 > MAX_DEPTH + 1:
            return level + 1
        stack.extend((child, level + 1) for child in children)
    return deepest


def content_problems(content: Any) -> tuple[list[str], bytes | None, str]:
    """Messages for a content that breaks a limit, else [], its canonical bytes and text."""
    if content is None:
        return ["content is required: any JSON value except null"], None, ""
    if depth(content) > MAX_DEPTH:
        return [f"content nests deeper than {MAX_DEPTH} levels"], None, ""
    try:
        canonical = canonical_json(content)
    except ValueError as exc:  # NaN/Infinity
        return [f"content is not valid JSON: {exc}"], None, ""
    if len(canonical) > MAX_CONTENT_BYTES:
        return [f"content is {len(canonical)} bytes as canonical JSON; the limit is {MAX_CONTENT_BYTES}"], None, ""
    text = searchable_text(content)
    if len(text.encode("utf-8")) > MAX_TEXT_BYTES:
        return [f"the text of content is {len(text.encode())} bytes; the limit is {MAX_TEXT_BYTES}"], None, ""
    if contains_nul(content):
        return ["content may not contain NUL (\\u0000) characters"], None, ""
    return [], canonical, text


def contains_nul(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def name_problem(value: Any, field: str) -> str | None:
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        return (
            f"{field} must be 1 to {MAX_NAME_LENGTH} characters of letters, digits and . _ : @ / + -"
        )
    return None
