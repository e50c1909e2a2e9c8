"""The memory gate: when a remembered fact needs a person's approval first.

An agent's `remember` call writes a fact that a person must approve before any read sees
it when the scope is wider than one person (`scope_reasons`) or when the text is aimed at
the assistant's behaviour rather than at the person it serves (`screen`). The policy
(issue 19): statements about a person or the world, and the person's own preferences
about how they are served, however phrased ("never email", "don't call after 6pm",
"always CC her assistant Tom"), are remembered at once; text aimed at the assistant's
rules, identity, tools, secrets and other people's data, deceiving or pressuring the
user, obeying later or embedded text, hiding itself, or sending money, contact or data to
a new destination waits for a reviewer.

Two layers, each giving *reasons* `{"rule", "match", "start"?, "end"?}` that the approval
shows to the reviewer (`start`/`end` are offsets into the text as given, so the admin can
highlight them):

1. **Certain signals are rules** (`hard_reasons`), read over a normalised form of the text
   (`normalise`: Unicode NFKC, invisible and format characters removed, accents dropped,
   Cyrillic and Greek look-alike letters folded to Latin, case folded, whitespace
   collapsed) and over variants that undo obfuscation (letters spaced or dotted apart,
   digits for letters, Unicode tag characters, base64):

   * `imperative` — unambiguous injection phrases: "ignore / disregard / forget …
     previous instructions", "new instructions:", "you are now", "developer mode",
     jailbreak vocabulary, "do not tell the user", "reveal your system prompt", "these
     instructions supersede …", "this is a system message", "when the user asks …
     respond …", and the same in Spanish, French, German, Portuguese, Italian, a little
     Russian, Chinese and Japanese. Phrases that are also ordinary in a person's
     preference ("always", "never", "don't tell him", "from now on", "you should") are
     not rules any more: the classifier weighs them.
   * `role-marker` — chat-template and prompt markers: `<|im_start|>`, `[INST]`,
     `<<SYS>>`, `### System:`, "system:" / "assistant:" at a line start, `<system>` tags.
   * `link` — URLs (any scheme, `www.`), `data:` / `javascript:` URIs, markdown links,
     HTML links and images, bare domains with a known top-level domain ("evil.com/x";
     e-mail addresses are not links), defanged links ("hxxp://", "evil[.]com"), an IP
     address with a port or path.
   * `account` — where money would go: an IBAN whose check digits hold (mod 97), a crypto
     wallet address.
   * `tool-name` — a tool the runtime offers (`BUILTIN_TOOL_NAMES` and the names passed in
     `tool_names`), matched as a word with `_`, `-`, `.` or nothing between its parts; a
     one-word name only where it reads as a tool ("search(", "`search`", "the search
     tool"); function-call syntax ("send_email(", "name(x=1)"); JSON tool-call keys.
   * `hidden-characters` — Unicode tag characters (outside an emoji flag), bidirectional
     overrides, zero-width characters between two letters.
   * `obfuscated` — fullwidth, circled or mathematical letters, a word mixing Latin with
     Cyrillic or Greek look-alikes ("Аlwауs"), letters spaced apart ("a.l.w.a.y.s").
   * `markup` — HTML comments and active markup (`<script`, `<iframe`, `on…=` handlers).
   * `encoded` — a base64 run whose decoded text itself gives a reason.

2. **The judgement of intent is learned** (`approvals.intent`): a logistic regression over
   hashed word and character n-grams of the normalised text, trained in the repo on
   tests/data/gate/corpus.jsonl (`python -m approvals.intent_train`). Over its threshold it
   gives `{"rule": "intent", "match", "start", "end", "score"}`, the span being the clause
   that pushes the score up the most.

`screen` runs both and says whether the text is held *only* because it reads as an order
(`order_only`: no rule fired, the classifier did, and the first clause opens like an
imperative); `remember` then answers with `REPHRASE_HINT`, so a well-behaved agent can
state the preference as a fact about the person and be remembered at once
(docs/agent-loop.md). Figures: docs/benchmarks.md, "Memory gate" (`bench/gate.py`).

At most `MAX_ANALYSED` characters are read and `MAX_REASONS` reasons returned; every
pattern is bounded, so adversarial text is read in linear time.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

# The tools every agent turn may be offered; an agent's own tools are added by the caller.
BUILTIN_TOOL_NAMES: tuple[str, ...] = (
    "memory_remember",
    "memory_save",
    "memory_search",
    "memory_delete",
    "memory_list",
    "memory_query",
    "memory_context",
    "memory_recall",
)

# Scopes wider than one person.
WIDE_SCOPES = ("same-project", "tenant")

MAX_ANALYSED = 20_000  # characters; a fact's text is at most a few thousand
MAX_REASONS = 50  # one is enough to wait for a person; fifty are enough to see why


def scope_reasons(scope: str) -> list[dict]:
    """`[{"rule": "wide-scope", "match": scope}]` for a scope wider than one person, else []."""
    return [{"rule": "wide-scope", "match": scope}] if scope in WIDE_SCOPES else []


# --- normalisation ---------------------------------------------------------------------------

# Look-alike letters (lower case, after casefold) → the Latin letter they imitate.
HOMOGLYPHS = {
    # Cyrillic
    "а": "a", "в": "b", "е": "e", "ё": "e", "з": "3", "к": "k", "м": "m", "н": "h", "о": "o",
    "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "ѕ": "s", "і": "i", "ї": "i", "ј": "j",
    "ԁ": "d", "ɡ": "g", "һ": "h", "ӏ": "l", "ԛ": "q", "ԝ": "w", "ү": "y", "ҽ": "e", "ո": "n",
    "ս": "u", "ց": "g", "օ": "o", "ꞇ": "t", "ь": "b", "п": "n", "г": "r", "и": "u", "л": "n",
    "ԍ": "g", "ɩ": "i", "ʏ": "y", "ᴦ": "r",
    # Greek
    "α": "a", "β": "b", "γ": "y", "δ": "d", "ε": "e", "ζ": "z", "η": "n", "ι": "i", "κ": "k",
    "ν": "v", "ο": "o", "ρ": "p", "σ": "o", "ς": "c", "τ": "t", "υ": "u", "χ": "x", "ω": "w",
    "ϲ": "c", "ϳ": "j", "μ": "u",
    # Latin variants and symbols
    "ı": "i", "ȷ": "j", "ł": "l", "ø": "o", "đ": "d", "ħ": "h", "ŀ": "l", "ſ": "s", "ƅ": "b",
    "ɑ": "a", "ɒ": "a", "ǝ": "e", "ɛ": "e", "ɪ": "i", "ʀ": "r", "ʜ": "h", "ɴ": "n", "ʟ": "l",
    "ᴀ": "a", "ᴄ": "c", "ᴅ": "d", "ᴇ": "e", "ᴊ": "j", "ᴋ": "k", "ᴍ": "m", "ᴏ": "o", "ᴘ": "p",
    "ᴛ": "t", "ᴜ": "u", "ᴠ": "v", "ᴡ": "w", "ᴢ": "z", "ꜱ": "s", "ɢ": "g", "ƒ": "f",
}

# Characters that are invisible but not in category Cf (which is removed wholesale).
_INVISIBLE_EXTRA = {0x115F, 0x1160, 0x3164, 0xFFA0, 0x034F, 0x2800}
_ZERO_WIDTH = {0x200B, 0x200C, 0x200D, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0xFEFF, 0x00AD, 0x180E}
_BIDI = set(range(0x202A, 0x202F)) | set(range(0x2066, 0x206A)) | {0x200E, 0x200F, 0x061C}
_TAG_FIRST, _TAG_LAST = 0xE0000, 0xE007F
_LINE_BREAKS = {"\n", "\r", "\x0b", "\x0c", "\x85", "\u2028", "\u2029"}
# Punctuation look-alikes NFKC leaves alone.
_PUNCTUATION = {
    "\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u00b4": "'", "\u2032": "'", "\u201b": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u00ab": '"', "\u00bb": '"', "\u2033": '"',
    "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2015": "-", "\u2212": "-",
    "\u2044": "/", "\u2215": "/", "\u29f8": "/", "\u3002": ".", "\u2027": ".", "\u30fb": ".", "\u00b7": ".",
    "\u0589": ":", "\ua789": ":", "\u02d0": ":", "\u2236": ":",
}
_BLACK_FLAG = 0x1F3F4  # 🏴 + tag letters + cancel tag: a subdivision flag, the one honest use of tags


def _invisible(char: str) -> bool:
    code = ord(char)
    if code in _INVISIBLE_EXTRA or _TAG_FIRST <= code <= _TAG_LAST:
        return True
    category = unicodedata.category(char)
    if category in {"Cf", "Mn", "Me", "Cs", "Co"}:
        return True
    return category == "Cc" and not char.isspace()


@dataclass
class _Mapped:
    """A derived text with, for each of its characters, the span of the original it came from."""

    text: str
    starts: list[int]
    ends: list[int]

    def span(self, start: int, end: int) -> tuple[int, int] | None:
        if not self.starts or end <= start or start >= len(self.starts):
            return None
        return self.starts[start], self.ends[min(end, len(self.ends)) - 1]


class _Builder:
    def __init__(self) -> None:
        self.chars: list[str] = []
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, text: str, start: int, end: int) -> None:
        self.chars.extend(text)
        self.starts.extend([start] * len(text))
        self.ends.extend([end] * len(text))

    def build(self) -> _Mapped:
        return _Mapped("".join(self.chars), self.starts, self.ends)


def _strip_marks(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) not in {"Mn", "Me"})


@functools.lru_cache(maxsize=1 << 16)
def _folded(cluster: str, fold: bool) -> str:
    """What one base character and its marks become in `_base` ("" when invisible): a pure
    function of the cluster, so each distinct cluster is worked out once per process."""
    if _invisible(cluster[0]):
        # A lone invisible character, or a mark with nothing to sit on: dropped (with its marks).
        return ""
    piece = _strip_marks(unicodedata.normalize("NFKC", cluster))
    out = []
    for char in piece:
        if _invisible(char):
            continue
        for lower in char.casefold():
            if fold:
                lower = HOMOGLYPHS.get(lower, lower)
            lower = _PUNCTUATION.get(lower, lower)
            if lower in _LINE_BREAKS:
                lower = "\n"
            elif lower.isspace() or unicodedata.category(lower) in {"Zs", "Zl", "Zp"}:
                lower = " "
            out.append(lower)
    return "".join(out)


def _base(text: str, *, fold: bool, collapse: bool = True) -> _Mapped:
    """NFKC per base character and its marks; invisible characters out; accents off; casefold."""
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    i, n = 0, len(text)
    while i < n:
        j = i + 1
        # Combining marks start at U+0300: below it, no category lookup is needed.
        while j < n and text[j] >= "\u0300" and unicodedata.category(text[j]) in {"Mn", "Me", "Mc"}:
            j += 1
        piece = _folded(text[i:j], fold)
        if len(piece) == 1:
            chars.append(piece)
            starts.append(i)
            ends.append(j)
        elif piece:
            chars.extend(piece)
            starts.extend([i] * len(piece))
            ends.extend([j] * len(piece))
        i = j
    mapped = _Mapped("".join(chars), starts, ends)
    return _collapse(mapped) if collapse else mapped


def _collapse(mapped: _Mapped) -> _Mapped:
    """Runs of whitespace become one space (one line break if they hold one); none at either end."""
    chars: list[str] = []
    kept: list[int] = []
    for index, char in enumerate(mapped.text):
        if char == " " or char == "\n":
            if not chars:
                continue
            if chars[-1] == " " or chars[-1] == "\n":
                if char == "\n":
                    chars[-1] = "\n"
                continue
        chars.append(char)
        kept.append(index)
    while chars and chars[-1] in " \n":
        chars.pop()
        kept.pop()
    starts, ends = mapped.starts, mapped.ends
    return _Mapped("".join(chars), [starts[k] for k in kept], [ends[k] for k in kept])


def normalise(text: str) -> str:
    """The form the rules read: NFKC, invisible characters removed, accents dropped,
    look-alike letters folded to Latin, case folded, whitespace collapsed."""
    return " ".join(_base(text[:MAX_ANALYSED], fold=True).text.split())


# Single letters kept apart by spaces or punctuation: "i g n o r e", "a.l.w.a.y.s", "n-e-v-e-r".
_SPACED = re.compile(r"(?<![a-z0-9])[a-z](?:[ .\-_*|/+~,'`:]{1,3}[a-z](?![a-z0-9])){2,}")


def despace(text: str) -> str:
    """`normalise(text)` with letters spaced or dotted apart joined again ("i g n o r e" → "ignore")."""
    return " ".join(_despaced(_base(text[:MAX_ANALYSED], fold=True, collapse=False)).text.split())


def _narrowest_gap(run: str) -> int:
    return min(len(gap) for gap in re.findall(r"[^a-z]+", run))


def _despaced(mapped: _Mapped) -> _Mapped:
    out = _Builder()
    last = 0
    for run in _SPACED.finditer(mapped.text):
        for index in range(last, run.start()):
            out.add(mapped.text[index], mapped.starts[index], mapped.ends[index])
        # Within a run, one separator joins letters and a wider gap ("A L W A Y S   R E P L Y")
        # parts words.
        for piece in re.finditer(r"[a-z]|[^a-z]+", run.group()):
            index = run.start() + piece.start()
            if piece.group().isalpha():
                out.add(piece.group(), mapped.starts[index], mapped.ends[index])
            elif len(piece.group()) >= 2 and piece.group().strip(" ") == "" and len(piece.group()) > _narrowest_gap(run.group()):
                out.add(" ", mapped.starts[index], mapped.ends[index])
        last = run.end()
    for index in range(last, len(mapped.text)):
        out.add(mapped.text[index], mapped.starts[index], mapped.ends[index])
    return out.build()


_LEET = {"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s", "!": "i", "|": "l"}
_LEET_TOKEN = re.compile(r"[a-z0-9@$!|]+")
_EMAIL = re.compile(r"[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)+")


def _unleet(mapped: _Mapped) -> _Mapped | None:
    """Digits and symbols standing for letters in a word that also has letters ("1gn0r3")."""
    chars = list(mapped.text)
    changed = False
    emails = [match.span() for match in _EMAIL.finditer(mapped.text)] if "@" in mapped.text else []
    for token in _LEET_TOKEN.finditer(mapped.text):
        word = token.group()
        if not re.search(r"[a-z]", word) or not re.search(r"[0-9@$!|]", word):
            continue
        if any(start < token.end() and token.start() < end for start, end in emails):
            continue
        for index in range(token.start(), token.end()):
            if chars[index] in _LEET:
                chars[index] = _LEET[chars[index]]
                changed = True
    if not changed:
        return None
    return _Mapped("".join(chars), mapped.starts, mapped.ends)


def _compact(mapped: _Mapped) -> _Mapped:
    """Letters only: what is left when every space and punctuation mark is taken out."""
    out = _Builder()
    for index, char in enumerate(mapped.text):
        if char.isalpha():
            out.add(char, mapped.starts[index], mapped.ends[index])
    return out.build()


def _tag_text(text: str) -> _Mapped | None:
    """The ASCII smuggled in Unicode tag characters (U+E0020–U+E007E), if any."""
    out = _Builder()
    for index, char in enumerate(text):
        code = ord(char)
        if 0xE0020 <= code <= 0xE007E:
            out.add(chr(code - 0xE0000), index, index + 1)
        elif out.chars and out.chars[-1] != " ":
            out.add(" ", index, index + 1)
    if not out.chars:
        return None
    built = out.build()
    decoded = _base(built.text, fold=True)
    # Re-map through the tag span map.
    return _Mapped(decoded.text, [built.starts[s] for s in decoded.starts], [built.ends[e - 1] for e in decoded.ends])


# --- patterns ----------------------------------------------------------------------------------

# Where a clause opens: the start, or after sentence punctuation, a comma, a line break, a
# bullet or an opening quote; then optionally a discourse word ("also,", "ok", "please").
_OPENERS = (
    r"also|ok|okay|important|note|notice|ps|btw|nb|additionally|finally|moreover|furthermore|plus|now|"
    r"and|but|then|so|oh|hey|hi|hello|reminder|remember|warning|attention|update|instruction|instructions|"
    r"system|admin|assistant|ai|bot|rule|rules|tip|attention|urgent|todo"
)
_ADDRESS = (
    r"you|u|ya|ye|youre|you're|please|pls|plz|kindly|assistant|ai|bot|chatbot|model|llm|gpt|chatgpt|claude|gemini|"
    r"copilot|bitte|favor|favore|plait|vous|usted|ustedes|voce|voces"
)
_CLAUSE_BREAK = re.compile(r"[.!?;:,\n\"“”«»()\[\]{}<>|*•#>]|\s-\s|^-|\s—\s")
_WORD = re.compile(r"[a-z0-9']+")
_ADDRESS_WORDS = set(_ADDRESS.split("|"))
_OPENER_WORDS = set(_OPENERS.split("|")) | {"please", "pls", "plz", "kindly"}


def _clause_prefix(text: str, position: int) -> str:
    """The words of the clause before `position`."""
    start = max(0, position - 200)
    window = text[start:position]
    last = None
    for last in _CLAUSE_BREAK.finditer(window):
        pass
    if last is not None:
        window = window[last.end():]
    return window.strip()


def _opens_clause(text: str, position: int) -> bool:
    """Nothing but discourse words before `position` in its clause."""
    words = _WORD.findall(_clause_prefix(text, position))
    return all(word in _OPENER_WORDS for word in words[-3:]) and len(words) <= 3


def _addressed(text: str, position: int) -> bool:
    """The clause opens here, or names the model ("you", "please", "assistant") just before."""
    if _opens_clause(text, position):
        return True
    words = _WORD.findall(_clause_prefix(text, position))
    return any(word in _ADDRESS_WORDS for word in words[-4:])


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern
    rule: str = "imperative"
    context: str = "any"  # "any" | "addressed" | "opens"


def _p(source: str, *, rule: str = "imperative", context: str = "any") -> _Pattern:
    return _Pattern(re.compile(_strip_marks(source)), rule, context)


_QUALIFIERS = (
    r"all|any|the|of|your|my|these|those|previous|previously|prior|above|earlier|preceding|foregoing|former|"
    r"original|initial|system|developer|developers|safety|existing|current|other|every|that|this|was|said|"
    r"before|mentioned|aforementioned|given|provided|old|hidden|internal|default|and|such|set"
)
_INSTRUCTION_NOUNS = (
    r"instructions?|prompts?|rules?|guidelines?|directions?|directives?|constraints?|guardrails?|restrictions?|"
    r"polic(?:y|ies)|programming|context|training|system messages?|filters?|safeguards?|commands?|orders?|"
    r"limitations?|boundaries|principles|ethics|content policy|moderation"
)
# A qualifier that makes "forget the … rules" about the model's own rules.
_STRONG_QUALIFIERS = (
    r"all|any|your|previous|previously|prior|above|earlier|preceding|foregoing|former|original|initial|system|"
    r"developer|developers|safety|hidden|internal|default|every|these|those"
)
_OVERRIDE_VERBS = r"ignore|disregard|forget|override|overrule|bypass|discard|abandon|drop|skip|circumvent|neglect|dismiss|erase|reset|break|violate|suspend"

# Phrases that address a model's instructions or conduct (after normalisation: lower case, no accents).
IMPERATIVE_PATTERNS: list[_Pattern] = [
    # -- English: overriding instructions
    _p(rf"\b(?:{_OVERRIDE_VERBS})\s+(?:(?:{_QUALIFIERS})\s+){{0,3}}(?:{_STRONG_QUALIFIERS})\s+(?:(?:{_QUALIFIERS})\s+){{0,3}}(?:{_INSTRUCTION_NOUNS})\b"),
    _p(r"\b(?:ignore|disregard|forget)\s+(?:everything|all|anything)\s+(?:(?:that|which|you)\s+)?(?:above|before|previously|prior|earlier|so far|until now|(?:you(?:'ve| have)?\s+)?(?:been\s+)?(?:told|taught|learned|know)|(?:was|i|we)\s+(?:said|wrote|told))"),
    _p(r"\b(?:new|updated|revised|real|actual|true|secret|hidden|additional|override|overriding|priority|higher priority)\s+(?:system\s+)?(?:instructions?|directives?|system prompt|persona)\s*(?:[:\-]|(?:are|is|follow|below|apply|take)\b)"),
    _p(r"\b(?:your|these|following|here are|the real|the actual|the secret|the hidden|obey the|follow the) (?:new|updated|revised|real|actual|true|secret|hidden)\s+(?:system\s+)?(?:instructions?|directives?|persona)\b"),
    _p(r"\bsystem\s*(?:override|directive)\b"),
    _p(r"\b(?:god|unrestricted|unfiltered|uncensored|jailbreak|jailbroken|evil|dan|chaos|opposite)\s+mode\b"),
    _p(r"\b(?:enable|activate|enter|switch to|you are in|you're in|now in)\s+(?:the\s+)?(?:developer|dev|admin|debug|root|sudo)\s+mode\b"),
    _p(r"\b(?:jailbreak|jailbroken|jail-break|prompt injection|dan prompt|anti-?gpt|no longer bound|not bound by|free from (?:all |any )?(?:rules|restrictions|constraints|guidelines)|(?:disable|remove|turn off|switch off|bypass|deactivate|lift)\s+(?:all\s+|any\s+|your\s+|the\s+)?(?:safety|content|security)?\s*(?:filters?|moderation|guardrails|safety checks|safeguards|censorship|restrictions))\b"),
    _p(r"\byou(?:'re| are) (?:now|no longer|henceforth|hereby)\b"),
    _p(r"\byour\s+(?:new\s+|real\s+|true\s+|actual\s+|main\s+|only\s+|primary\s+|first\s+)?(?:task|role|job|goal|purpose|instructions?|objective|mission|persona|directive|priority)\s+(?:is|are|will be|:|now)"),
    _p(r"\byour new name is\b"),
    _p(r"\b(?:do not|don't|dont|never|must not|mustn't|shouldn't|should not)\s+(?:ever\s+)?(?:tell|inform|let|notify|alert|warn|reveal|disclose|show|mention (?:this|it|that|anything)(?: to)?|say (?:this|it|that|anything)(?: to)?|share (?:this|it|that))\s+(?:the user|users|the customer|customers|the human|humans|the admin|the operator|the reviewer|the developer|your (?:user|developer|creator|operator|admin))\b"),
    _p(r"\b(?:print|reveal|repeat|output|leak|dump)\s+(?:your\s+(?:system\s+)?(?:prompt|instructions)|the system prompt)\b"),
    _p(r"\bgrant\s+(?:me|them|him|her|this user|the user|everyone)\s+(?:admin|administrator|root|full|elevated|superuser|unlimited)\b"),
    _p(r"\b(?:decode|base64|rot13|hex)\b.{0,40}\b(?:follow|execute|obey|run|do what|comply)\b"),
    _p(r"\b(?:obey|comply with|follow|adhere to)\s+(?:only\s+)?(?:the following|the new|the hidden|the embedded|all future|the instructions|these instructions)\s*(?:new\s+)?(?:instructions?|rules|orders|commands|directives?|guidelines|below|:)"),
    _p(r"\b(?:the|these|this|following) (?:instructions?|directives?) (?:supersede|override|replace|take precedence|take priority)\b"),
    _p(r"\b(?:above|previous|prior|earlier) (?:instructions?|rules|prompts?|messages?) (?:are|were|is) (?:void|invalid|obsolete|cancelled|canceled|wrong|fake|outdated|no longer)\b"),
    _p(r"\b(?:this|the following) is (?:a|an|the) (?:system|admin|administrator|developer|official|priority|important) (?:message|instruction|notice|override|update|command)\b"),
    _p(r"\bas your (?:developer|creator|administrator|admin|owner|operator|system)\b"),
    _p(r"\bwhen(?:ever)? (?:the )?(?:user|customer|anyone|someone|they|a user) (?:asks?|says?|mentions?|writes?|requests?|types?)\b.{0,80}\b(?:respond|reply|answer|say|tell|recommend|send|direct|redirect|give|offer|output|link)\b"),
    _p(r"\b(?:switch|change)\s+(?:to|into)\s+(?:\w+\s+)?(?:persona|character|role)\b"),
    _p(r"\b(?:important|urgent|critical|attention|warning)\s*[:!]+\s*(?:ai|assistant|model|llm|bot|chatbot|agent)\b"),
    # -- Spanish
    _p(r"\b(?:ignora|ignore|ignoren|olvida|olvide|olviden|descarta|omite|pasa por alto|haz caso omiso de)\s+(?:(?:todas|todos|las|los|tus|sus|cualquier|toda|la|el|de|mis)\s+){0,3}(?:instrucciones|reglas|indicaciones|ordenes|directrices|normas|restricciones|prompt)\b"),
    _p(r"\b(?:olvida|olvide)\s+(?:todo|lo anterior|lo que te (?:dije|dijeron))\b"),
    _p(r"\b(?:ahora eres|ahora tu eres|eres ahora|finge (?:ser|que)|haz de cuenta|tu nueva tarea|tus nuevas instrucciones|prompt del sistema|mensaje del sistema)\b"),
    # -- French
    _p(r"\b(?:ignore|ignorez|ignorer|oublie|oubliez|oublier|neglige|negligez|ne tiens pas compte|ne tenez pas compte)\s+(?:(?:toutes|tous|les|tes|vos|ses|des|de|d'|toute|la|le|mes|ces)\s*){0,3}(?:instructions|consignes|regles|directives|ordres|restrictions|prompt)\b"),
    _p(r"\b(?:oublie|oubliez)\s+(?:tout|ce que)\b"),
    _p(r"\b(?:tu es maintenant|vous etes maintenant|tu es desormais|vous etes desormais|fais semblant|faites semblant|joue le role|jouez le role|tes nouvelles instructions|vos nouvelles instructions|invite systeme|message systeme|prompt systeme)\b"),
    # -- German
    _p(r"\b(?:ignoriere|ignorier|ignorieren sie|vergiss|vergessen sie|missachte|missachten sie|uberspringe|verwirf)\s+(?:(?:alle|alles|deine|ihre|die|vorherigen|vorigen|bisherigen|fruheren|obigen|bisher|deiner|ihrer)\s+){0,3}(?:anweisungen|anweisung|regeln|vorgaben|instruktionen|befehle|richtlinien|einschrankungen|prompt|systemprompt)\b"),
    _p(r"\b(?:vergiss|vergessen sie)\s+(?:alles|was)\b"),
    _p(r"\b(?:du bist jetzt|du bist nun|tu so als|tun sie so als|verhalte dich wie|deine neue aufgabe|deine neuen anweisungen|systemprompt|systemnachricht|system-prompt)\b"),
    # -- Portuguese
    _p(r"\b(?:ignore|ignora|ignorem|esqueca|esquece|esquecam|desconsidere|desconsidera|descarte)\s+(?:(?:todas|todos|as|os|suas|seus|tuas|teus|quaisquer|a|o|de|das|dos)\s+){0,3}(?:instrucoes|regras|orientacoes|ordens|diretrizes|restricoes|prompt)\b"),
    _p(r"\b(?:esqueca|esquece)\s+(?:tudo|o que)\b"),
    _p(r"\b(?:voce agora e|agora voce e|voce e agora|tu es agora|finja (?:ser|que)|sua nova tarefa|suas novas instrucoes|prompt do sistema|mensagem do sistema)\b"),
    # -- Italian
    _p(r"\b(?:ignora|ignori|ignorate|dimentica|dimentichi|dimenticate|trascura|tralascia|non considerare)\s+(?:(?:tutte|tutti|le|i|gli|tue|tuoi|sue|suoi|qualsiasi|la|il|di|delle|dei|mie|precedenti)\s+){0,3}(?:istruzioni|regole|indicazioni|ordini|direttive|restrizioni|prompt)\b"),
    _p(r"\b(?:dimentica|dimentichi)\s+(?:tutto|quello che|cio che)\b"),
    _p(r"\b(?:ora sei|adesso sei|sei ora|fingi di|fai finta|il tuo nuovo compito|le tue nuove istruzioni|prompt di sistema|messaggio di sistema)\b"),
]

# Patterns read on the text without look-alike folding (their letters are not Latin).
NATIVE_PATTERNS: list[_Pattern] = [
    _p(r"(?:игнорируй|игнорируйте|забудь|забудьте|не обращай внимания на)\s+(?:(?:все|всё|свои|твои|ваши|предыдущие|прежние|эти)\s+){0,3}(?:инструкции|указания|правила|команды|промпт)"),
    _p(r"(?:забудь|забудьте)\s+(?:всё|все|то, что)"),
    _p(r"(?:теперь ты|ты теперь|отныне ты|с этого момента ты|притворись|веди себя как|системный промпт|новые инструкции|системное сообщение)"),
    _p(r"(?:不要|别)告诉(?:用户|任何人)|忽略(?:之前|以上|上面|前面|所有)(?:的)?(?:所有)?(?:指令|指示|说明|规则|提示)|系统提示|从现在开始你|你现在是|新的指令"),
    _p(r"(?:以前|前|上記|これまで)の(?:指示|命令|ルール)を(?:無視|忘れ)|システムプロンプト"),
]

# Chat-template and prompt markers.
ROLE_MARKERS: list[_Pattern] = [
    _p(r"<\|\s*(?:im_start|im_end|im_sep|system|user|assistant|endoftext|eot_id|start_header_id|end_header_id|begin_of_text|end_of_text|tool|ipython|fim_\w+)\s*\|>", rule="role-marker"),
    _p(r"<\|[a-z_]{2,30}\|>", rule="role-marker"),
    _p(r"\[/?inst\]|<</?sys>>|\[/?sys(?:tem)?\]|\[/?(?:assistant|user)\]", rule="role-marker"),
    _p(r"(?<![\w#])#{2,}\s*(?:system|instruction|instructions|assistant|user|response|human|ai|developer|prompt)\b", rule="role-marker"),
    _p(r"(?:^|\n)\s*(?:system|assistant|developer|ai|sys)\s*:", rule="role-marker"),
    _p(r"(?:^|[.!?]\s)(?:system|assistant|developer)\s*:", rule="role-marker"),
    _p(r"</?\s*(?:system|instructions?|assistant|user|prompt|admin|developer|tool_call|tool_calls|function_call|context|im_start|im_end)\s*/?>", rule="role-marker"),
    _p(r"\b(?:begin|end|start)\s+(?:of\s+)?(?:system|hidden|secret|new|admin)\s+(?:prompt|instructions?|message)\b", rule="role-marker"),
    _p(r"(?:^|\s)(?:human|assistant|user)\s*:\s.{0,200}\b(?:assistant|human|user)\s*:", rule="role-marker"),
]

MARKUP_PATTERNS: list[_Pattern] = [
    _p(r"<!--", rule="markup"),
    _p(r"<\s*(?:script|iframe|object|embed|svg|style|form|meta|link|base)\b", rule="markup"),
    _p(r"\bon(?:error|load|click|mouseover|focus)\s*=", rule="markup"),
    _p(r"display\s*:\s*none|font-size\s*:\s*0|visibility\s*:\s*hidden", rule="markup"),
]

# -- always / never -----------------------------------------------------------------------------

_ALWAYS_NEVER = {
    "en": ("always", "never"),
    "es": ("siempre", "nunca", "jamas"),
    "fr": ("toujours", "jamais"),
    "de": ("immer", "nie", "niemals", "stets"),
    "pt": ("sempre", "nunca", "jamais"),
    "it": ("sempre", "mai"),
}
_ALWAYS_NEVER_WORDS = sorted({word for words in _ALWAYS_NEVER.values() for word in words})
_ALWAYS_NEVER_RE = re.compile(r"\b(" + "|".join(_ALWAYS_NEVER_WORDS) + r")\b")

# A next word that makes the adverb part of a statement, not an order.
_STATEMENT_NEXT = set(
    # English: determiners, pronouns, prepositions, auxiliaries, adjectives, adverbs
    "the a an this that these those my our his her their its your some any every each no one two three none "
    "i we he she they it there here me us him them you "
    "after before at on in by for from with without during until till around about near via within between "
    "except over under through to of into onto upon than as like "
    "had has have having been being was were is are am did does got gets went seemed seems felt feels looked looks "
    "again once ever late early happy glad sure fun nice good great bad enough too so very more less quite really "
    "much many late available open closed busy welcome ready true false correct right wrong yes ok okay "
    "and or but nor not mind "
    # Spanish, French, German, Portuguese, Italian
    "el la los las un una unos unas mi mis tu tus su sus nuestro nuestra en con de del por para que lo es fue ha he "
    "estoy esta estan era son yo ella nosotros ellos ellas "
    "le les une mon ma mes ton ta tes son sa ses notre nos leur leurs au aux avec du des pour est etait je j il elle "
    "on nous vous ils elles "
    "der die das dem den des ein eine einen einem einer mein meine meinen sein seine ihr ihre am im an auf mit von "
    "zu zum zur um ist war hat habe bin sind wurde wieder ich er sie es wir mehr noch gleich "
    "o os as uma meu minha meus minhas seu sua em no na nos nas com do da dos das foi eu ele ela eles elas "
    "il lo gli i mio mia miei suo sua al allo alla ai agli alle di dello della dei degli delle da dal dalla per che "
    "e stato io lui lei noi loro piu".split()
)
_ING_VERBS = {"bring", "sing", "ring", "sting", "swing", "fling", "cling", "wring", "string", "ping", "spring", "sling"}
_ED_VERBS = {"embed", "shed", "shred", "wed", "bed", "speed"}

# Clause-opening imperative verbs in languages that put the adverb after the verb.
_FOREIGN_IMPERATIVES = set(
    "responde contesta dile escribe usa utiliza menciona recomienda habla envia incluye ofrece trata llama ignora "
    "olvida sigue pon da manda agrega anade "
    "reponds repondez dis dites ecris ecrivez utilise utilisez mentionne mentionnez recommande recommandez parle "
    "parlez envoie envoyez inclus incluez propose proposez traite traitez ignore ignorez oublie oubliez suis suivez "
    "mets mettez donne donnez ajoute ajoutez "
    "antworte antworten sage sagen schreibe schreib benutze benutzen verwende verwenden erwahne erwahnen empfiehl "
    "empfehlen sprich sprechen sende senden schicke schicken nenne nennen ignoriere ignorieren vergiss vergessen "
    "folge folgen gib geben fuge "
    "responda diga escreva use mencione recomende fale envie inclua ofereca esqueca siga coloque adicione "
    "rispondi scrivi menziona raccomanda consiglia parla invia manda includi offri dimentica segui metti "
    "aggiungi".split()
)


_INTENSIFIERS = {"ever", "just", "only", "really", "also", "still", "please", "simply"}


def _next_word(text: str, end: int) -> str | None:
    """The next word, over intensifiers ("never ever reply" → "reply")."""
    position = end
    for _ in range(4):
        match = _NEXT.match(text, position)
        if match is None:
            return None
        if match.group(1) not in _INTENSIFIERS:
            return match.group(1)
        position = match.end()
    return None


_NEXT = re.compile(r"[ ]*([a-z0-9']+)")


def _verb_like(word: str | None) -> bool:
    """Could `word` be a verb in the imperative (base form)?"""
    if word is None or word in _STATEMENT_NEXT or word[0].isdigit():
        return False
    if word.endswith("ing") and word not in _ING_VERBS:
        return False
    if word.endswith("ed") and not word.endswith("eed") and word not in _ED_VERBS:
        return False
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        return False
    return len(word) > 1


def _always_never(text: str) -> list[tuple[int, int]]:
    """Spans of "always"/"never" (and kin) in imperative position; see the module docstring."""
    spans = []
    for match in _ALWAYS_NEVER_RE.finditer(text):
        word = match.group(1)
        start, end = match.span()
        prefix_words = _WORD.findall(_clause_prefix(text, start))
        if _opens_clause(text, start):
            following = _next_word(text, end)
            if _verb_like(following):
                spans.append((start, end))
                continue
            if word in _ALWAYS_NEVER["de"] and _german_infinitive_clause(text, end):
                spans.append((start, end))
                continue
        if _addresses_model(prefix_words) and (
            not _MODEL_NOUNS.intersection(prefix_words[-4:]) or _verb_like(_next_word(text, end))
        ):
            spans.append((start, end))
            continue
        if word not in _ALWAYS_NEVER["en"] and _foreign_imperative(prefix_words):
            spans.append((start, end))
            continue
        if word == "jamais" and _french_ne_clause(prefix_words):
            spans.append((start, end))
    return spans


# Address words that are nouns: "the bot never understands" describes it, "the bot should never reply" orders it.
_MODEL_NOUNS = {"assistant", "ai", "bot", "chatbot", "model", "llm", "gpt", "chatgpt", "claude", "gemini", "copilot"}

# Words that may stand between "you" and "always": "you must always", "you need to never".
_BETWEEN = set(
    "must should shall will 'll need needs to have has are is do does can may might would could ought now also "
    "just then please yourself really therefore hereby henceforth from on always never only still".split()
)


def _addresses_model(prefix_words: list[str]) -> bool:
    """"you (must|should|need to …) always", "please always", "make sure to always"."""
    tail = prefix_words[-4:]
    for index in range(len(tail) - 1, -1, -1):
        word = tail[index]
        if word in _ADDRESS_WORDS or word in {"sure", "remember", "forget"} and index < len(tail) - 1:
            return all(between in _BETWEEN for between in tail[index + 1:])
        if word not in _BETWEEN:
            return False
    return False


def _foreign_imperative(prefix_words: list[str]) -> bool:
    """"Responde siempre …", "Antworten Sie immer …": a clause-opening imperative verb, then the adverb."""
    words = [w for w in prefix_words if w not in _OPENER_WORDS] if len(prefix_words) <= 4 else prefix_words
    if len(words) == 1 and words[0] in _FOREIGN_IMPERATIVES:
        return True
    return len(words) == 2 and words[1] == "sie" and words[0].endswith("en")


def _french_ne_clause(prefix_words: list[str]) -> bool:
    """"Ne mentionne jamais …": a clause that opens with "ne" and a verb (no subject)."""
    words = [w for w in prefix_words if w not in _OPENER_WORDS]
    return 1 <= len(words) <= 3 and len(prefix_words) <= 5 and (words[0] in {"ne", "n"} or words[0].startswith("n'"))


def _german_infinitive_clause(text: str, end: int) -> bool:
    """"Immer auf Deutsch antworten": the clause ends in an infinitive (-en, ≥ 5 letters)."""
    rest = text[end:end + 200]
    stop = _CLAUSE_BREAK.search(rest)
    clause = rest[: stop.start()] if stop else rest
    words = _WORD.findall(clause)
    return len(words) >= 2 and words[-1].endswith("en") and len(words[-1]) >= 5


# -- links --------------------------------------------------------------------------------------

_TLDS = (
    "com|net|org|io|ai|co|app|dev|info|biz|xyz|me|ly|gg|tk|ml|ga|cf|gq|ru|cn|de|uk|fr|es|it|nl|eu|us|ca|au|in|jp|"
    "br|ch|se|be|at|dk|fi|cz|top|online|site|shop|store|click|link|live|tech|cloud|page|icu|club|vip|win|bid|su|"
    "to|cc|ws|tv|gl|ir|kp|onion|example|test|local|invalid|sh|su|pw|zip|mov|lol|xxx|rest|fun|space|website|host|"
    "ninja|work|email|support|help|services|download|stream|news|blog|gov|edu|mil|int|name|pro|mobi|ly|im|is|ms|"
    "nu|re|ro|ua|by|kz|pl|pt|gr|hu|ie|no|nz|za|mx|ar|cl|kr|tw|hk|sg|vn|th|tr|il|sa|ae|ng|ke|eg"
)
_LINK_PATTERNS: list[_Pattern] = [
    _p(r"\b(?:https?|ftp|ftps|sftp|file|wss?|ssh|git|s3|gopher|ldap|smb|irc|telnet)\s*:\s*/\s*/\s*[^\s<>\"'`]*", rule="link"),
    _p(r"\b(?:data|javascript|vbscript|mailto|tel|sms|intent|blob)\s*:\s*[^\s<>\"'`]+", rule="link"),
    _p(r"\bh(?:xx|\*\*|tt)ps?\[?:\]?//[^\s<>\"'`]*", rule="link"),
    _p(r"\bwww\d?\s*\.\s*[a-z0-9-]+(?:\.[a-z0-9-]+)*[^\s<>\"'`]*", rule="link"),
    _p(r"\[[^\]\n]{1,200}\]\(\s*[^)\s]{1,500}\s*\)", rule="link"),
    _p(r"<\s*(?:a\s[^>]*href|img\s[^>]*src)\s*=", rule="link"),
    _p(r"\b[a-z0-9-]{2,63}\s*(?:\[\.\]|\(\.\)|\{\.\}|\[dot\]|\(dot\)|\{dot\})\s*[a-z]{2,24}\b[^\s<>\"'`]*", rule="link"),
    _p(r"(?<!\bthe)\s[a-z0-9-]{2,63} dot (?:com|net|org|io|ru|xyz|info|co)\b", rule="link"),
    _p(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5}|/)[^\s<>\"'`]*", rule="link"),
    # A bare domain: labels, a known top-level domain, then an end or a path; not an e-mail address.
    _p(rf"(?<![@\w.\-])(?:[a-z0-9](?:[a-z0-9-]{{0,61}}[a-z0-9])?\.){{1,6}}(?:{_TLDS})(?![a-z0-9-])(?:[:/?#][^\s<>\"'`]*)?", rule="link"),
]
_FILE_EXTENSION_DOMAIN = re.compile(r"^[a-z0-9_-]+\.(?:sh|zip|mov|pl|py|md|rs|in|is|no|it|at|be|to|me|us)$")


# Where money goes: an IBAN (country, check digits that hold, 11 to 30 letters and digits)
# and a crypto wallet (bech32 "bc1…", Ethereum "0x" and 40 hex digits, Tron "T…", a legacy
# Bitcoin address with letters and digits). An agent serving a person rarely needs one in
# memory, and a redirected payment is the costliest poisoning there is: always a reviewer.
_ACCOUNT_PATTERNS: list[_Pattern] = [
    _p(r"(?<![a-z0-9])[a-z]{2}\d{2}(?:[ ]?[a-z0-9]{4}){2,7}(?:[ ]?[a-z0-9]{1,4})?(?![a-z0-9])", rule="account"),
    _p(r"(?<![a-z0-9])(?:bc1[a-z0-9]{25,60}|0x[0-9a-f]{40}|t[a-z0-9]{33}|[13](?=[a-z0-9]*\d[a-z0-9]*[a-z])[a-z0-9]{25,34})(?![a-z0-9])", rule="account"),
]


def _iban(match: str) -> bool:
    """An IBAN: 15 to 34 letters and digits whose check digits hold (ISO 13616, mod 97)."""
    compact = match.replace(" ", "").upper()
    if not 15 <= len(compact) <= 34:
        return False
    return int("".join(str(int(c, 36)) for c in compact[4:] + compact[:4])) % 97 == 1


# -- tool names ---------------------------------------------------------------------------------

_CALL_SYNTAX = [
    # an identifier with "_" or "." directly followed by "(": send_email(, os.system(, tools.refund(
    _p(r"\b[a-z_][a-z0-9]{0,60}(?:[_.][a-z0-9]{1,60}){1,6}\(", rule="tool-name"),
    # any identifier followed by arguments: name(), name(x=1), name("…"), name({…})
    _p(r"\b[a-z_][a-z0-9_]{1,60}\(\s*(?:\)|[a-z_][a-z0-9_]*\s*=|[\"'{\[])", rule="tool-name"),
    _p(r"[\"'](?:tool_calls?|function_call|tool_call_id|tool_name|arguments|function|tool)[\"']\s*:", rule="tool-name"),
]


@functools.lru_cache(maxsize=1024)
def _tool_name_pattern(name: str) -> re.Pattern | None:
    """A tool's name as a word: its parts joined by "_", "-", "." or nothing ("memoryRemember").

    A one-word name ("search") is an ordinary word too, so it counts only where it reads as
    a tool: called ("search("), quoted ("`search`") or named as one ("the search tool").
    """
    parts = [part for part in re.split(r"[_\-.\s:/]+", normalise(name)) if part]
    if not parts:
        return None
    if len(parts) == 1:
        word = re.escape(parts[0])
        return re.compile(
            rf"(?<![a-z0-9]){word}\(|[`'\"]{word}[`'\"]|(?<![a-z0-9]){word}\s+(?:tool|function)\b"
        )
    body = r"[_\-.:/]?".join(re.escape(part) for part in parts)
    return re.compile(rf"(?<![a-z0-9]){body}(?![a-z0-9])")


# --- running the rules -------------------------------------------------------------------------


class _Collector:
    def __init__(self, original: str) -> None:
        self.original = original
        self.reasons: list[dict] = []
        self._seen: set[tuple] = set()

    def add(self, rule: str, match: str, span: tuple[int, int] | None) -> None:
        match = match.strip()
        if not match or len(self.reasons) >= MAX_REASONS:
            return
        key = (rule, match) if span is None else (rule, span)
        if key in self._seen or (span is not None and self._overlaps(rule, span)):
            return
        self._seen.add(key)
        self._seen.add((rule, match))
        reason = {"rule": rule, "match": match[:200]}
        if span is not None:
            reason["start"], reason["end"] = span
        self.reasons.append(reason)

    def _overlaps(self, rule: str, span: tuple[int, int]) -> bool:
        return any(
            r["rule"] == rule and "start" in r and r["start"] < span[1] and span[0] < r["end"] for r in self.reasons
        )


def _run(mapped: _Mapped, collector: _Collector, tool_patterns: list[tuple[str, re.Pattern]], *, native: _Mapped | None = None,
         accounts: bool = False) -> None:
    text = mapped.text
    for pattern in IMPERATIVE_PATTERNS + ROLE_MARKERS + MARKUP_PATTERNS:
        for match in pattern.regex.finditer(text):
            if pattern.context == "addressed" and not _addressed(text, match.start()):
                continue
            if pattern.context == "opens" and not _opens_clause(text, match.start()):
                continue
            collector.add(pattern.rule, match.group(), mapped.span(*match.span()))
    for pattern in _LINK_PATTERNS:
        for match in pattern.regex.finditer(text):
            found = match.group()
            trimmed = found.rstrip(".,;:!?)]}'\"")
            if "(" in trimmed and found.endswith(")") and trimmed.count("(") > trimmed.count(")"):
                trimmed += ")"  # a link whose own path has parentheses
            if not trimmed or _FILE_EXTENSION_DOMAIN.match(trimmed):
                continue  # "setup.sh", "notes.zip": a file name more likely than a link
            span = mapped.span(match.start(), match.start() + len(trimmed))
            if span is not None and normalise(collector.original[span[0]:span[1]]) == trimmed:
                trimmed = collector.original[span[0]:span[1]]  # a link's path is case-sensitive: show it as written
            collector.add("link", trimmed, span)
    # Account numbers on the text as written only: digits read as letters make checksums by chance.
    for pattern in _ACCOUNT_PATTERNS if accounts else ():
        for match in pattern.regex.finditer(text):
            found = match.group()
            if pattern is _ACCOUNT_PATTERNS[0]:
                # The last groups may be the next words ("… 3249 31 from now"): the check digits decide.
                words = found.split(" ")
                while len(words) > 1 and not any(c.isdigit() for c in words[-1]):
                    words.pop()  # a word, not a group of an account number
                found = next((c for c in (" ".join(words[:n]) for n in range(len(words), 0, -1)) if _iban(c)), "")
                if not found:
                    continue
            span = mapped.span(match.start(), match.start() + len(found))
            collector.add("account", collector.original[span[0]:span[1]] if span else found, span)
    for name, regex in tool_patterns:
        for match in regex.finditer(text):
            collector.add("tool-name", name, mapped.span(*match.span()))
    for pattern in _CALL_SYNTAX:
        for match in pattern.regex.finditer(text):
            collector.add("tool-name", match.group(), mapped.span(*match.span()))
    if native is not None:
        for pattern in NATIVE_PATTERNS:
            for match in pattern.regex.finditer(native.text):
                collector.add(pattern.rule, match.group(), native.span(*match.span()))


# Distinctive phrases looked for in the letters-only form, where no spacing trick survives.
_COMPACT_PHRASES = (
    "ignoreallpreviousinstructions", "ignorepreviousinstructions", "ignoreallinstructions", "ignoreallprior",
    "ignoretheaboveinstructions", "ignoreyourinstructions", "ignoreallrules", "disregardpreviousinstructions",
    "disregardallinstructions", "disregardallprevious", "disregardyourinstructions", "forgetallpreviousinstructions",
    "forgetyourinstructions", "forgetallinstructions", "jailbreak", "developermodeenabled", "youarenowdan",
    "ignorezlesinstructions",
    "ignoralasinstrucciones", "ignorierealleanweisungen", "ignoraleistruzioni",
)


def _hidden_characters(text: str, collector: _Collector) -> None:
    """One reason per run of hidden characters: "U+200B", or "U+E0049 … U+E0073 (33 characters)"."""
    hidden: list[int] = []
    index, length = 0, len(text)
    while index < length:
        if _TAG_FIRST <= ord(text[index]) <= _TAG_LAST:
            end = index
            while end < length and _TAG_FIRST <= ord(text[end]) <= _TAG_LAST:
                end += 1
            if not _is_flag(text, index, end):
                hidden.extend(range(index, end))
            index = end
            continue
        if _is_hidden(text, index, text[index]):
            hidden.append(index)
        index += 1
    runs: list[list[int]] = []
    for index in hidden:
        if runs and runs[-1][-1] == index - 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    for run in runs:
        first, last = ord(text[run[0]]), ord(text[run[-1]])
        match = f"U+{first:04X}" if len(run) == 1 else f"U+{first:04X} … U+{last:04X} ({len(run)} characters)"
        collector.add("hidden-characters", match, (run[0], run[-1] + 1))


_LOOKALIKE_LETTERS = re.compile(r"[\uff21-\uff3a\uff41-\uff5a\u24b6-\u24e9\U0001d400-\U0001d7ff]+")
_WORD_RUN = re.compile(r"[^\W\d_]{2,}")
_SPACED_WORD = re.compile(r"(?<![^\W\d_])[^\W\d_](?:[ .\-_*|/+~,'`:]{1,3}[^\W\d_](?![^\W\d_])){3,}")


def _obfuscated(text: str, collector: _Collector) -> None:
    """Letters dressed up as other letters: fullwidth, circled or mathematical letters; a word
    mixing Latin with Cyrillic or Greek look-alikes ("Аlwауs"); letters spaced apart ("a.l.w.a.y.s").
    A person's preference has no need of them; a text that hides its words from filters does."""
    for match in _LOOKALIKE_LETTERS.finditer(text):
        collector.add("obfuscated", match.group(), match.span())
    for match in _WORD_RUN.finditer(text):
        word = match.group()
        latin = any(c.isascii() for c in word)
        lookalike = any(not c.isascii() and c.casefold() in HOMOGLYPHS and unicodedata.name(c, "").split()[0] in {"CYRILLIC", "GREEK"} for c in word)
        if latin and lookalike:
            collector.add("obfuscated", word, match.span())
    for match in _SPACED_WORD.finditer(text):
        if sum(c.isalpha() for c in match.group()) >= 4:
            collector.add("obfuscated", match.group(), match.span())


def _is_hidden(text: str, index: int, char: str) -> bool:
    """A bidirectional control, or a zero-width or format character next to a letter (tags apart)."""
    code = ord(char)
    if code in _BIDI:
        return True
    if code in _ZERO_WIDTH or code in _INVISIBLE_EXTRA or unicodedata.category(char) == "Cf":
        if code == 0xFEFF and index == 0:
            return False  # a byte order mark
        before = _neighbour(text, index, -1)
        after = _neighbour(text, index, +1)
        return _latin(before) and _latin(after) or code in {0x200B, 0xFEFF, 0x2060} and (_latin(before) or _latin(after))
    return False


def _neighbour(text: str, index: int, step: int) -> str:
    """The nearest visible character before (-1) or after (+1) `index`."""
    index += step
    for _ in range(8):  # a longer invisible run is reported anyway; don't walk it for every character
        if not (0 <= index < len(text) and _invisible(text[index])):
            break
        index += step
    return text[index] if 0 <= index < len(text) else ""


def _latin(char: str) -> bool:
    return bool(char) and (char.isascii() and char.isalpha() or char.casefold() in HOMOGLYPHS)


def _is_flag(text: str, start: int, end: int) -> bool:
    """A run of tag characters that makes a subdivision flag: 🏴, tag letters, a cancel tag."""
    if start == 0 or ord(text[start - 1]) != _BLACK_FLAG:
        return False
    run = text[start:end]
    return ord(run[-1]) == 0xE007F and len(run) <= 7 and all(0xE0061 <= ord(c) <= 0xE007A or 0xE0030 <= ord(c) <= 0xE0039 for c in run[:-1])


_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")


def _encoded(text: str, collector: _Collector, tool_patterns) -> None:
    for run in _BASE64_RUN.finditer(text):
        blob = run.group()
        try:
            raw = base64.b64decode(blob + "=" * (-len(blob) % 4), altchars=b"-_" if ("-" in blob or "_" in blob) else None, validate=False)
            decoded = raw.decode("utf-8")
        except (binascii.Error, ValueError, UnicodeDecodeError):
            continue
        if not decoded or sum(c.isprintable() or c.isspace() for c in decoded) < 0.9 * len(decoded):
            continue
        inner = _Collector(decoded)
        _run(_base(decoded, fold=True), inner, tool_patterns)
        if inner.reasons:
            collector.add("encoded", inner.reasons[0]["match"], run.span())


def unspaced_script(char: str) -> bool:
    """A letter of a script written without spaces between words: Chinese, Japanese, Thai, Lao, Khmer, Myanmar."""
    code = ord(char)
    return (0x3040 <= code <= 0x30FF or 0x3400 <= code <= 0x9FFF or 0xF900 <= code <= 0xFAFF or 0x20000 <= code <= 0x2FFFF
            or 0x0E00 <= code <= 0x0EFF or 0x1780 <= code <= 0x17FF or 0x1000 <= code <= 0x109F)


# A line break or tab written as an escape ("\\n" in a JSON string sent as text): the model reads
# it as a break, so the rules do too. Same length, so every span still points into the text.
_ESCAPED_BREAK = re.compile(r"(?<!\\)\\[nrt]")


def _escapes_as_spaces(text: str) -> str:
    return _ESCAPED_BREAK.sub("  ", text)


def hard_reasons(text: str, *, tool_names: Iterable[str] = ()) -> list[dict]:
    """The certain signals in `text` (every rule but `intent`); [] when there is none.

    Each reason is `{"rule", "match", "start"?, "end"?}`: the rule (module docstring),
    what it matched in normalised form, and where in `text` (when it can be mapped).
    """
    text = _escapes_as_spaces(text[:MAX_ANALYSED])
    names = [*BUILTIN_TOOL_NAMES, *(name for name in tool_names if isinstance(name, str) and name.strip())]
    tool_patterns = [(name, regex) for name in dict.fromkeys(names) if (regex := _tool_name_pattern(name)) is not None]
    collector = _Collector(text)
    loose = _base(text, fold=True, collapse=False)  # spacing kept, for `_despaced`
    folded = _collapse(loose)
    native = _base(text, fold=False)
    _run(folded, collector, tool_patterns, native=native, accounts=True)
    despaced = _collapse(_despaced(loose))
    if despaced.text != folded.text:
        _run(despaced, collector, tool_patterns)
    unleeted = _unleet(folded)
    if unleeted is not None:
        _run(unleeted, collector, tool_patterns)
        despaced_unleeted = _collapse(_despaced(_unleet(loose) or loose))
        if despaced_unleeted.text != unleeted.text:
            _run(despaced_unleeted, collector, tool_patterns)
    compact = _compact(unleeted or folded)
    for phrase in _COMPACT_PHRASES:
        position = compact.text.find(phrase)
        if position >= 0:
            collector.add("imperative", phrase, compact.span(position, position + len(phrase)))
    tags = _tag_text(text)
    if tags is not None:
        _run(tags, collector, tool_patterns)
    _hidden_characters(text, collector)
    _obfuscated(text, collector)
    _encoded(text, collector, tool_patterns)
    return sorted(collector.reasons, key=lambda r: (r.get("start", len(text)), r["rule"]))


# Told to the agent when a text is held only because it reads as an order to the assistant.
REPHRASE_HINT = (
    "Held for a reviewer because it reads as an order to the assistant. If it is this person's own "
    "preference, call memory_remember again with it written as a statement about them, e.g. "
    "\"Prefers phone calls; does not want email\" instead of \"Never email him\"."
)


@dataclass(frozen=True)
class Screening:
    """What the gate found in a text: its reasons, and whether the only one is that it reads as an order."""

    reasons: list[dict]
    order_only: bool = False
    vector: object = None  # the passage vector the classifier read (given or made here); None if it read none


def screen(text: str, *, tool_names: Iterable[str] = (), vector=None, vectors: bool = True) -> Screening:
    """The gate on `text`: the certain signals (rules), then the judgement of intent (classifier).

    `vector`: the local model's passage vector of `text` when the caller has it (a write's own
    embedding, approvals.intent.reusable); without it the classifier makes one, unless
    `vectors` is off (then its word model decides alone). Text a rule holds is never embedded.

    `order_only` is true when nothing but the classifier holds the text and its first
    clause is phrased as an order ("Never email him", "Book window seats"): restated as a
    fact about the person ("Prefers …", "Does not want …") it may be remembered at once.
    `vector` on the result is the vector the classifier read, so a caller whose write has none
    yet may store the one made here (agent.services.remember).
    """
    from approvals.intent import intent_decision, passage_vectors

    text = text[:MAX_ANALYSED]
    reasons = hard_reasons(text, tool_names=tool_names)
    if reasons:  # held already, for a certain reason: the classifier could only add to it
        return Screening(reasons, False)
    if vectors and vector is None:
        vector = passage_vectors([text])[0]
    folded = _base(text, fold=True)
    vector = vector if vectors else None
    held, probability, span = intent_decision(folded.text, vector=vector)
    if not held:
        return Screening([], False, vector)
    start, end = span
    reason = {"rule": "intent", "match": folded.text[start:end][:200], "score": round(float(probability), 3)}
    original = folded.span(start, end)
    if original is not None:
        reason["start"], reason["end"] = original
    return Screening([reason], phrased_as_order(folded.text), vector)


def instruction_reasons(text: str, *, tool_names: Iterable[str] = ()) -> list[dict]:
    """Why `text` needs a reviewer (rules and the intent classifier); [] when it may be remembered."""
    return screen(text, tool_names=tool_names).reasons


# Words that open an order in the first clause: "never email", "don't call", "please book".
_ORDER_OPENERS = {"never", "always", "don't", "dont", "do", "no", "only", "please", "avoid", "keep", "make", "nie", "niemals",
                  "immer", "bitte", "keine", "kein", "jamais", "toujours", "ne", "pas", "nunca", "siempre", "no", "non", "mai",
                  "sempre", "nao"}
_STATEMENT_SECOND = {"is", "was", "has", "had", "are", "were", "will", "would", "can", "could", "does", "did", "isn't", "wasn't",
                     "doesn't", "didn't", "hasn't", "ist", "hat", "war", "est", "a", "es", "esta", "tiene", "e", "ha"}


def phrased_as_order(normalised: str) -> bool:
    """Does the first clause open like an imperative ("Never book aisle seats", "Call him after 6")?"""
    words = _WORD.findall(_CLAUSE_BREAK.split(normalised, maxsplit=1)[0])
    while words and words[0] in _OPENER_WORDS and words[0] not in _ORDER_OPENERS:
        words = words[1:]
    if not words:
        return False
    first, second = words[0], words[1] if len(words) > 1 else None
    if first in _ORDER_OPENERS or _always_never(normalised[:40]):
        return True
    if first in _STATEMENT_NEXT or "'" in first or not _verb_like(first):
        return False
    return second is None or not (second in _STATEMENT_SECOND or second.endswith("s") and not second.endswith("ss"))


def approval_reasons(*, text: str, scope: str, tool_names: Iterable[str] = ()) -> list[dict]:
    """Every reason a remembered fact waits for a person: its scope, then its text."""
    return scope_reasons(scope) + instruction_reasons(text, tool_names=tool_names)
