"""Auto-extraction of working memory from an agent turn and from a compaction summary.

Pure logic, no database and no Django: these functions say *what* to save (a list of
`Capture`) and *which stored keys to delete* for the caps (`prune`); the database
layer does the writing. Follows the kdeps design (pkg/agent/memory_store.go); the
differences are noted where they are made.

From a turn (`extract_turn`):

* `[MEMORY: key] value` markers in the assistant's text (the first one per key wins);
* the first action sentence as `last_action`, its leading verb dropped
  ("Added rate limiting middleware to the HTTP handler" -> "rate limiting middleware to
  the HTTP handler");
* the file paths of edit/create/read sentences as `last_files`
  ("Edited src/api/handler.go and src/api/middleware.go" ->
  "src/api/handler.go, src/api/middleware.go");
* each write/exec/search tool result as `tool:<tool>:<slug of its first line>`
  (read-only lookups are skipped);
* the model's reasoning as `thinking:<UTC timestamp>`.

From a compaction summary (`capture_compaction`): `## Key Decisions` bullets as
`decision` entries, `## Critical Context` bullets as `context` entries, and a
`checkpoint:summary` entry with the Goal, Progress, Key Decisions and Critical Context.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timezone

from workspaces.block import (
    ACTION,
    CONTEXT,
    DECISION,
    FACT,
    FILE,
    NOTE,
    STATUS,
    THINKING,
    THINKING_PREFIX,
    TOOL_PREFIX,
    TOOL_RESULT,
    infer_type,
)

# --------------------------------------------------------------------------- limits and caps

VALUE_LIMIT = 500  # bytes (UTF-8) of an auto-captured value, "..." included (kdeps' maxValueLength)
TOOL_RESULT_LIMIT = 300  # bytes of a saved tool result (kdeps' memoryMaxValuePreview)
THINKING_LIMIT = VALUE_LIMIT
CHECKPOINT_LIMIT = 4000  # kdeps does not cut the checkpoint; this bounds it anyway
KEY_LIMIT = 80  # characters of a key made from text (kdeps' memoryMaxKeyLength)
TOOL_KEY_FIRST_LINE = 40  # characters of the output's first line used for the key
TOOL_KEY_SLUG = 30  # characters of that slug kept

TOOL_RESULT_CAP = 20  # newest results kept per tool
THINKING_CAP = 20  # newest thinking entries kept
LOW_SIGNAL_CAP = 50  # newest note + fact entries kept, combined
LOW_SIGNAL_TYPES = frozenset({NOTE, FACT})

TRUNCATION_MARK = "..."

# Read-only lookups produce noise, not facts (the seed's list; kdeps' own table still
# listed read_file and search_local as worth remembering).
READ_ONLY_TOOLS = frozenset({"read_file", "list_files", "search_local"})
# kdeps' write/exec/search tools.
MEMORY_WORTHY_TOOLS = frozenset({
    "write_file", "edit_file", "bash_exec", "sql_query", "http_request", "web_search", "web_scraper", "wikipedia",
})
# Other tools count when a segment of their name is a write/exec/search verb
# ("create_issue", "github.search_code", "run_tests"); kdeps has only the fixed table.
_WORTHY_SEGMENT = re.compile(
    r"(?:^|[_.:\-])(?:write|edit|create|update|upsert|insert|delete|remove|patch|apply|move|rename|commit|push|"
    r"merge|deploy|install|build|exec|execute|run|bash|shell|command|cmd|terminal|test|search|query|sql|http|"
    r"request|fetch|scrape|scraper|crawl|browse)(?:$|[_.:\-])"
)


def is_memory_worthy(tool_name: str) -> bool:
    """Whether a tool's results are saved: write/exec/search tools yes, read-only lookups never."""
    name = (tool_name or "").strip().lower()
    if not name or name in READ_ONLY_TOOLS:
        return False
    return name in MEMORY_WORTHY_TOOLS or bool(_WORTHY_SEGMENT.search(name))


# --------------------------------------------------------------------------- captures


@dataclass(frozen=True)
class Capture:
    key: str
    value: str
    type: str
    references: tuple[str, ...] = ()  # explicit parents (compaction entries point at the checkpoint)


# --------------------------------------------------------------------------- truncation


def _extends_previous(ch: str) -> bool:
    """A character that belongs to the one before it: combining marks, joiners, selectors."""
    cp = ord(ch)
    return (
        unicodedata.category(ch) in ("Mn", "Me", "Mc")
        or ch == "\u200d"  # zero-width joiner
        or 0xFE00 <= cp <= 0xFE0F or 0xE0100 <= cp <= 0xE01EF  # variation selectors
        or 0x1F3FB <= cp <= 0x1F3FF  # skin tones
        or 0xE0020 <= cp <= 0xE007F  # emoji tag sequences (subdivision flags)
    )


def truncate_value(value: str, limit: int) -> str:
    """`value` if its UTF-8 form fits in `limit` bytes, else a prefix ending in "...".

    The whole result, "..." included, fits in `limit` bytes (kdeps adds the mark past the
    limit). The cut never splits a code point, and it is backed off further so a
    combining mark, a zero-width joiner sequence, a skin tone, a variation selector or
    half of a flag pair is not separated from the character it belongs to.
    """
    if len(value.encode("utf-8")) <= limit:
        return value
    if limit <= len(TRUNCATION_MARK):
        return TRUNCATION_MARK[: max(limit, 0)]
    room = limit - len(TRUNCATION_MARK)
    cut, used = 0, 0
    for ch in value:
        size = len(ch.encode("utf-8"))
        if used + size > room:
            break
        used += size
        cut += 1
    while cut > 0 and (_extends_previous(value[cut]) or value[cut - 1] == "\u200d"):
        cut -= 1
    # Regional indicators pair up into flags: an odd run before the cut ends mid-flag.
    run = 0
    while run < cut and 0x1F1E6 <= ord(value[cut - 1 - run]) <= 0x1F1FF:
        run += 1
    if run % 2 and cut < len(value) and 0x1F1E6 <= ord(value[cut]) <= 0x1F1FF:
        cut -= 1
    return value[:cut] + TRUNCATION_MARK


# --------------------------------------------------------------------------- text helpers

_MARKER = re.compile(r"\[MEMORY:\s*([^\]\n]+?)\s*\]\s*([^\n]+)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")
_LEAD = re.compile(r"^\s*(?:(?:[-*+•>]|\d+[.)]|#{1,6}|\[[ xX]\]|✅|✔️?|☑️?)\s*)*")  # bullets, numbers, headings, ticks


def _prose_sentences(text: str) -> list[str]:
    """Sentences of `text` outside fenced code blocks and `[MEMORY: ...]` markers."""
    sentences: list[str] = []
    fenced = False
    for line in (text or "").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        line = _MARKER.sub("", line)
        for sentence in _SENTENCE_BREAK.split(line):
            sentence = _LEAD.sub("", sentence).strip()
            if sentence:
                sentences.append(sentence)
    return sentences


def extract_markers(text: str) -> list[Capture]:
    """`[MEMORY: key] value` anywhere in the text; the value runs to the end of the line.
    The first marker for a key wins (kdeps)."""
    seen: dict[str, Capture] = {}
    for match in _MARKER.finditer(text or ""):
        key, value = match.group(1).strip(), match.group(2).strip()
        if key and value and key not in seen:
            seen[key] = Capture(key, truncate_value(value, VALUE_LIMIT), infer_type(key))
    return list(seen.values())


# kdeps' action verbs.
ACTION_VERBS = (
    "added", "fixed", "changed", "updated", "created", "removed", "deleted", "set", "configured",
    "installed", "built", "deployed", "refactored", "migrated", "patched", "resolved",
)
_ACTION = re.compile(
    r"^(?:(?:i|we)(?:'ve|\s+have)?\s+|(?:also|then|finally|just|now|first|next|so)\s*,?\s+)*"
    r"[*_]*(?:" + "|".join(ACTION_VERBS) + r")\b[*_]*\s+(?P<rest>.+)$",
    re.IGNORECASE,
)
ACTION_MIN, ACTION_MAX = 5, 200  # characters; shorter or longer sentences are skipped (kdeps)


def _trim_action(rest: str) -> str:
    rest = rest.strip().rstrip(".!;:*_ ")
    if rest.count("`") % 2:
        rest = rest.rstrip("`").rstrip(".!;:*_ ")
    return rest


def extract_action(text: str) -> Capture | None:
    """`last_action`: the first sentence that starts with an action verb, minus the verb.

    The verb may follow "I", "We", "I've", "Also", "Then" ... or a list bullet. kdeps
    matches the verb anywhere in a line (so "reset" or "the config was not set" counted)
    and keeps the rest of the line; here it must start the sentence, and the capture
    stops at the end of that sentence.
    """
    for sentence in _prose_sentences(text):
        match = _ACTION.match(sentence)
        if not match:
            continue
        action = _trim_action(match.group("rest"))
        if ACTION_MIN <= len(action) <= ACTION_MAX:
            return Capture("last_action", truncate_value(action, VALUE_LIMIT), ACTION)
    return None


FILE_VERBS = (
    "edited", "modified", "updated", "changed", "patched", "refactored", "created", "wrote", "written",
    "added", "read", "opened", "viewed", "inspected", "saved",
)
_FILE_VERB = re.compile(r"\b(?:" + "|".join(FILE_VERBS) + r")\b", re.IGNORECASE)
_COMMON_EXTENSIONS = frozenset(
    "py pyi go js mjs cjs ts tsx jsx json jsonl yaml yml toml ini cfg conf env md rst txt rs java kt kts c h cc "
    "cpp hpp cs rb php sh bash zsh fish ps1 sql html htm css scss sass less vue svelte swift m mm lock xml csv "
    "tsv ipynb gradle tf tfvars proto graphql gql r lua pl ex exs erl hs scala dart zig nim pdf docx xlsx png jpg "
    "jpeg gif svg log tex bib mod sum pkl bin db sqlite j2 jinja tmpl tpl".split()
)
_KNOWN_FILENAMES = frozenset({
    "Makefile", "Dockerfile", "Containerfile", "Procfile", "Gemfile", "Rakefile", "Justfile", "Vagrantfile",
    "Jenkinsfile", "README", "LICENSE", "CHANGELOG", "CODEOWNERS",
})
_NOT_FILES = frozenset({"e.g", "i.e", "etc", "vs", "a.m", "p.m"} | {
    f"{name}.js" for name in ("node", "vue", "next", "nuxt", "react", "express", "d3", "three", "chart", "ember",
                              "backbone", "angular", "deno", "bun")
})
_PATHISH = re.compile(r"[\w.~/+@-]+")


def _as_path(token: str) -> str | None:
    t = token
    while True:  # wrappers and sentence punctuation, in any nesting: "(`a.py`)." -> a.py
        stripped = t.strip("`'\"()[]{}<>,;!?*“”‘’").rstrip(".:")
        if stripped == t:
            break
        t = stripped
    t = re.sub(r"(?::\d+){1,2}$", "", t)  # file.go:42:7 -> file.go
    if not t or "://" in t or not _PATHISH.fullmatch(t) or not re.search(r"[^\W_]", t):
        return None
    if "@" in t and "/" not in t:  # an e-mail address
        return None
    if t.lower() in _NOT_FILES:
        return None
    base = t.rstrip("/").rsplit("/", 1)[-1]
    if base in _KNOWN_FILENAMES or re.fullmatch(r"\.[a-z][\w.-]*", base) and "/" in t:
        return t
    if re.fullmatch(r"\.(?:env(?:\.\w+)?|\w+rc|gitignore|dockerignore|gitattributes|editorconfig|profile)", base):
        return t  # dotfiles
    ext = re.search(r"[\w-]\.([A-Za-z][A-Za-z0-9]{0,9})$", base)
    if "/" in t:
        if ext or t.startswith(("/", "~/", "./", "../")) or t.endswith("/"):
            return t
        return None
    return t if ext and ext.group(1).lower() in _COMMON_EXTENSIONS else None


def extract_files(text: str) -> Capture | None:
    """`last_files`: paths named in sentences with an edit/create/read verb, in order, once each.

    Everything after the first such verb in a sentence is scanned: a token counts when it
    has a path shape (a slash with an extension or a leading /, ~/, ./, ../, or a file
    name with a common extension; URLs, e-mail addresses and "Node.js"-style names do
    not), with surrounding backticks, quotes and `:line` suffixes removed. kdeps takes one
    path per verb and only paths that start with ~, / or "."; the seed's example
    ("Edited src/api/handler.go and src/api/middleware.go") needs both paths.
    """
    found: list[str] = []
    for sentence in _prose_sentences(text):
        verb = _FILE_VERB.search(sentence)
        if not verb:
            continue
        for token in re.split(r"[\s,]+", sentence[verb.end():]):
            path = _as_path(token)
            if path and path not in found:
                found.append(path)
    if not found:
        return None
    return Capture("last_files", truncate_value(", ".join(found), VALUE_LIMIT), FILE)


def _tool_name(name: str) -> str:
    return re.sub(r"[\s:]+", "_", (name or "").strip()) or "tool"


def tool_result_key(tool_name: str, output: str) -> str:
    """`tool:<tool>:<slug>`: the slug is the output's first line (40 characters at most),
    lowercased, each run of characters other than a-z and 0-9 turned into one "_",
    trimmed of "_", 30 characters at most; "output" when nothing is left."""
    first = (output or "").split("\n", 1)[0].strip()[:TOOL_KEY_FIRST_LINE]
    slug = re.sub(r"[^a-z0-9]+", "_", first.lower()).strip("_")[:TOOL_KEY_SLUG].strip("_")
    return f"{TOOL_PREFIX}{_tool_name(tool_name)}:{slug or 'output'}"


def _result_text(result) -> str:
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(result)


def extract_tool_results(tool_calls: list[dict] | None) -> list[Capture]:
    """One `tool_result` capture per memory-worthy call with a non-empty result.

    The value is the result (a non-string result as JSON), cut at `TOOL_RESULT_LIMIT`.
    Two calls that give the same key keep the later result. `[MEMORY: ...]` markers in
    tool output are not honoured (a fetched page must not write memory); kdeps scans them.
    """
    by_key: dict[str, Capture] = {}
    for call in tool_calls or ():
        name = str((call or {}).get("name") or "")
        if not is_memory_worthy(name):
            continue
        text = _result_text(call.get("result")).strip()
        if not text:
            continue
        key = tool_result_key(name, text)
        by_key.pop(key, None)
        by_key[key] = Capture(key, truncate_value(text, TOOL_RESULT_LIMIT), TOOL_RESULT)
    return list(by_key.values())


def thinking_key(now: datetime) -> str:
    """`thinking:<UTC time to the microsecond>`, e.g. thinking:20250101T120000.000000Z."""
    moment = now.replace(tzinfo=timezone.utc) if now.tzinfo is None else now.astimezone(timezone.utc)
    return f"{THINKING_PREFIX}{moment:%Y%m%dT%H%M%S.%f}Z"


def extract_thinking(thinking: str | None, now: datetime) -> Capture | None:
    text = (thinking or "").strip()
    if not text:
        return None
    return Capture(thinking_key(now), truncate_value(text, THINKING_LIMIT), THINKING)


def extract_turn(
    *,
    assistant_text: str | None,
    tool_calls: list[dict] | None,
    thinking: str | None,
    now: datetime,
) -> list[Capture]:
    """Everything a finished turn gives to working memory, in this order: markers,
    last_action, last_files, tool results, thinking. One capture per key."""
    text = assistant_text or ""
    captures: list[Capture] = list(extract_markers(text))
    for single in (extract_action(text), extract_files(text)):
        if single:
            captures.append(single)
    captures += extract_tool_results(tool_calls)
    if (thought := extract_thinking(thinking, now)) is not None:
        captures.append(thought)
    unique: dict[str, Capture] = {}
    for c in captures:
        unique.setdefault(c.key, c)  # an explicit marker beats a derived capture of the same key
    return list(unique.values())


# --------------------------------------------------------------------------- compaction

CHECKPOINT_KEY = "checkpoint:summary"
CHECKPOINT_SECTIONS = ("Goal", "Progress", "Key Decisions", "Critical Context")
CAPTURED_SECTIONS = (("Key Decisions", DECISION), ("Critical Context", CONTEXT))
_NONE_VALUES = frozenset({"(none)", "none", "n/a", "-"})


def section_text(summary: str, title: str) -> str:
    """The body under a `## <title>` heading, up to the next `## ` heading, stripped.

    Deeper headings (`### Done`) stay inside the section. The heading must be its own
    line and is matched case-insensitively (kdeps searches the bare substring).
    """
    heading = re.search(rf"(?im)^##[ \t]+{re.escape(title)}[ \t]*:?[ \t]*$", summary or "")
    if not heading:
        return ""
    body = summary[heading.end():]
    following = re.search(r"(?m)^##[ \t]", body)
    return (body[: following.start()] if following else body).strip()


def memory_key(raw: str) -> str:
    """A key made from text: lowercase, spaces to "_", only letters, digits, "_" and "-",
    at most `KEY_LIMIT` characters (kdeps' sanitizeMemoryKey, letters of any script)."""
    key = re.sub(r"[^\w-]", "", (raw or "").strip().lower().replace(" ", "_"))
    return key[:KEY_LIMIT]


def _bullet(line: str) -> tuple[str, str] | None:
    line = line.strip()
    if not line.startswith(("- ", "* ")):
        return None
    content = line[2:].strip().replace("**", "")
    key, value = content, content
    if ": " in content:
        key, value = (part.strip() for part in content.split(": ", 1))
    if not key or not value or value.lower() in _NONE_VALUES:
        return None
    return key, value


def checkpoint_text(summary: str) -> str:
    """"Goal: ... | Progress: ... | Key Decisions: ... | Critical Context: ...", each
    section's newlines turned into spaces, absent sections left out."""
    parts = []
    for title in CHECKPOINT_SECTIONS:
        body = section_text(summary, title)
        if body:
            parts.append(f"{title}: " + " ".join(line.strip() for line in body.splitlines() if line.strip()))
    return " | ".join(parts)


def capture_compaction(summary: str) -> list[Capture]:
    """The checkpoint (type `status`, as kdeps saves it) first, then one `decision` per
    `## Key Decisions` bullet and one `context` per `## Critical Context` bullet.

    A bullet is "- **key**: value" (the key is made safe with `memory_key`) or "- value"
    (the key is made from the value); "(none)" bullets are skipped. Each of them refers to
    the checkpoint.
    """
    if not (summary or "").strip():
        return []
    captures: list[Capture] = []
    checkpoint = checkpoint_text(summary)
    if checkpoint:
        captures.append(Capture(CHECKPOINT_KEY, truncate_value(checkpoint, CHECKPOINT_LIMIT), STATUS))
    refs = (CHECKPOINT_KEY,) if checkpoint else ()
    seen = {CHECKPOINT_KEY}
    for title, kind in CAPTURED_SECTIONS:
        for line in section_text(summary, title).splitlines():
            parsed = _bullet(line)
            if not parsed:
                continue
            key = memory_key(parsed[0])
            if not key or key in seen:
                continue
            seen.add(key)
            captures.append(Capture(key, truncate_value(parsed[1], VALUE_LIMIT), kind, refs))
    return captures


# --------------------------------------------------------------------------- session entries

SESSION_CONFIG_KEY = "session:config"  # the LLM config (model, backend, base URL), saved on start and on a model switch
SESSION_STARTED_KEY = "session:started"  # the working directory at the start of a session
SESSION_RESUMED_KEY = "session:resumed"  # the working directory when a session is resumed


def session_config_capture(*, model: str, backend: str = "", base_url: str = "", **extra) -> Capture:
    """`session:config` as a JSON object (sorted keys) of the agent's LLM configuration."""
    config = {"model": model, "backend": backend, "base_url": base_url, **extra}
    return Capture(SESSION_CONFIG_KEY, json.dumps(config, sort_keys=True, ensure_ascii=False), CONTEXT)


def session_cwd_capture(cwd: str, *, resumed: bool = False) -> Capture:
    """`session:started` (or `session:resumed`) holding the working directory. Typed
    `context` so the low-signal cap never prunes it (the key alone would infer `note`)."""
    return Capture(SESSION_RESUMED_KEY if resumed else SESSION_STARTED_KEY, cwd, CONTEXT)


# --------------------------------------------------------------------------- caps


def _cap_group(key: str, kind: str) -> tuple[str, ...] | None:
    if kind == TOOL_RESULT and key.startswith(TOOL_PREFIX):
        return ("tool", key[len(TOOL_PREFIX):].split(":", 1)[0])
    if kind == THINKING:
        return ("thinking",)
    if kind in LOW_SIGNAL_TYPES:
        return ("low",)
    return None


_CAPS = {"tool": TOOL_RESULT_CAP, "thinking": THINKING_CAP, "low": LOW_SIGNAL_CAP}


def prune(
    existing: list[tuple[str, str, datetime]],
    incoming: list[Capture] | tuple[Capture, ...] = (),
) -> list[str]:
    """Stored keys to delete so the caps hold once `incoming` is written.

    `existing` is (key, type, timestamp) for the stored entries (use updated_at, as
    kdeps sorts by it); `incoming` are the captures about to be written, counted as the
    newest (one with a stored key replaces that row). Caps: `TOOL_RESULT_CAP` per tool
    (`tool:<tool>:...` keys of type tool_result), `THINKING_CAP` thinking entries,
    `LOW_SIGNAL_CAP` note + fact entries combined. The oldest go first (ties by key);
    every other type is never pruned. Only stored keys are returned, oldest first. To
    prune after writing, pass the stored rows (now including the new ones) and no
    `incoming`.
    """
    incoming_keys = {c.key: c.type for c in incoming}
    groups: dict[tuple[str, ...], list[tuple[int, float, str]]] = {}
    for key, kind, moment in existing:
        if key in incoming_keys:
            continue
        group = _cap_group(key, kind)
        if group:
            stamp = (moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment).timestamp()
            groups.setdefault(group, []).append((0, stamp, key))
    for key, kind in incoming_keys.items():
        group = _cap_group(key, kind)
        if group:
            groups.setdefault(group, []).append((1, 0.0, key))
    doomed: list[tuple[float, str]] = []
    for group, rows in groups.items():
        excess = len(rows) - _CAPS[group[0]]
        if excess > 0:
            rows.sort()
            doomed += [(stamp, key) for is_new, stamp, key in rows[:excess] if not is_new]
    return [key for _, key in sorted(doomed)]
