"""Markdown memory (seed 004): the `MEMORY.md` index and its topic files, as a view of facts.

Parse, render, lint, and the two decisions between a folder and the fact store — where
each fact goes in the folder (`build_folder`) and what an import writes (`plan_file`).
Pure Python: nothing here imports Django or reads the database, so `memoryhub markdown
lint` runs without a server and every rule can be tested on its own.
`profiles.markdown_memory` reads and writes the facts.

The mapping (docs/profiles-and-markdown.md):

- `[user]`, `[project]`, `[feedback]`, `[reference]` ↔ fact types `memory.user`,
  `memory.project`, `memory.feedback`, `memory.reference`, one to one in both directions.
- Each line of a topic file (a `- ` bullet, with its indented continuation lines) is one
  fact of the file's frontmatter type; content `{text, file, section?}`.
- Each index entry `- [type] summary → topic.md` is one fact of its own type; content
  `{text: summary, file: "MEMORY.md", section, topic?}`.
- Each file also has one `memory.layout` fact (key: the file name) that keeps what is
  not a memory: the lines between the bullets (title, headings, blank lines, prose), the
  frontmatter, and the order of the bullets (as fact ids). So a folder comes back byte for
  byte, and a fact written through the API (no layout knows it) still finds its place:
  its `file` and `section`, else the default topic file of its type, and an index entry
  made up for it while the index has room.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from facts.content import LAYOUT_TYPE  # noqa: F401  (a layout fact's type; search skips them)

INDEX = "MEMORY.md"
INDEX_TITLE = "# Memory Index"
TYPES = ("user", "project", "feedback", "reference")
SECTIONS = {"user": "User", "project": "Project", "feedback": "Feedback", "reference": "Reference"}
FACT_TYPES = {kind: f"memory.{kind}" for kind in TYPES}
MD_TYPES = {fact_type: kind for kind, fact_type in FACT_TYPES.items()}
# Where a fact of a type goes when it names no topic file (the seed's own file names).
DEFAULT_TOPICS = {
    "user": "user-preferences.md",
    "project": "project-conventions.md",
    "feedback": "feedback-history.md",
    "reference": "reference-notes.md",
}
MAX_INDEX_LINES = 200
MAX_ENTRY_CHARS = 150
ARCHIVE = "archive"  # memory/archive/: where lint suggests moving old entries; import never reads it
ARROW = "→"
# Topic file names become fact keys: letters, digits and `_ . @ + -`, ending in .md.
FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@+\-]{0,196}\.md")
_ITEM = re.compile(r"[-*+] (.*)")
_ENTRY = re.compile(r"\[([^\]\s]*)\]\s*(.*)", re.S)
_TOPIC = re.compile(r"(.*\S)\s*(→|->)\s*(\S+\.md)\s*")
_FRONTMATTER = re.compile(r"([A-Za-z_][\w-]*):\s*(.*?)\s*")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def valid_name(name: Any) -> bool:
    return isinstance(name, str) and FILE_NAME.fullmatch(name) is not None


def fact_type(kind: str) -> str:
    """`user` -> `memory.user`."""
    return FACT_TYPES[kind]


def md_type(kind: str) -> str | None:
    """`memory.user` -> `user`; None for any other fact type."""
    return MD_TYPES.get(kind)


# --- parsing ------------------------------------------------------------------------------------


@dataclass
class Problem:
    """Something wrong (an error stops an import) or worth knowing about a file."""

    file: str
    line: int | None
    code: str
    message: str

    def as_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "code": self.code, "message": self.message}


@dataclass
class Item:
    """One bullet: a topic line, or an index entry (`type`, `text` = summary, `topic`)."""

    line: int  # 1-based, where its bullet starts
    text: str  # without the bullet; continuation lines joined with "\n", indentation kept
    section: str | None  # the `## ` heading above it
    source: str = ""  # the lines as written
    type: str | None = None
    topic: str | None = None


@dataclass
class Parsed:
    """A file split into what is memory (items) and what is layout (everything else)."""

    name: str
    template: list = field(default_factory=list)  # literal lines, and item numbers where items go
    items: list[Item] = field(default_factory=list)
    frontmatter: list | None = None  # topic files: [[key, value]], [None, raw] for other lines
    title: str | None = None
    type: str | None = None  # topic files: the frontmatter type
    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    @property
    def is_index(self) -> bool:
        return self.name == INDEX


def parse(name: str, text: str) -> Parsed:
    """Split a file into items and layout; `errors` say what an import would refuse."""
    parsed = Parsed(name=name)
    if not valid_name(name):
        parsed.errors.append(Problem(name, None, "file-name", "a memory file is named like topic-name.md: letters, digits and _ . @ + -"))
        return parsed
    lines = text.replace("\r\n", "\n").split("\n")
    start = 0 if parsed.is_index else _frontmatter(parsed, lines)
    _body(parsed, lines, start)
    for item in parsed.items:
        if parsed.is_index:
            _entry(parsed, item)
        rendered = index_line(item.type, item.text, item.topic) if parsed.is_index and item.type else topic_line(item.text)
        if not parsed.errors and rendered != item.source:
            parsed.warnings.append(Problem(name, item.line, "rewritten", f"export writes this line as: {rendered}"))
    return parsed


def _frontmatter(parsed: Parsed, lines: list[str]) -> int:
    """Read `---` … `---` at the top of a topic file; returns the first line after it."""
    help_text = "a topic file starts with frontmatter: ---, type: user|project|feedback|reference, created: YYYY-MM-DD, updated: YYYY-MM-DD, ---"
    if not lines or lines[0].strip() != "---":
        parsed.errors.append(Problem(parsed.name, 1, "no-frontmatter", help_text))
        return 0
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        parsed.errors.append(Problem(parsed.name, 1, "no-frontmatter", "the frontmatter is not closed with ---"))
        return 0
    pairs = []
    for raw in lines[1:end]:
        match = _FRONTMATTER.fullmatch(raw)
        pairs.append([match[1], match[2]] if match else [None, raw])
    parsed.frontmatter = pairs
    values = {key: value for key, value in pairs if key}
    kind = values.get("type")
    if kind not in TYPES:
        parsed.errors.append(Problem(
            parsed.name, 2, "topic-type",
            f"frontmatter type is {kind!r}; it must be one of user, project, feedback, reference",
        ))
    else:
        parsed.type = kind
    for key in ("created", "updated"):
        if key not in values:
            parsed.warnings.append(Problem(parsed.name, 1, "no-date", f"the frontmatter has no {key}: export adds one"))
    return end + 1


def _body(parsed: Parsed, lines: list[str], start: int) -> None:
    section: str | None = None
    fence: str | None = None
    i = start
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            parsed.template.append(line)
            i += 1
            continue
        if stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            parsed.template.append(line)
            i += 1
            continue
        match = _ITEM.fullmatch(line)
        if match:
            text, end = match[1], i + 1
            # Indented lines right below a bullet belong to it (wrapped text, nested bullets).
            while end < len(lines) and lines[end][:1] in (" ", "\t") and lines[end].strip():
                text += "\n" + lines[end]
                end += 1
            parsed.template.append(len(parsed.items))
            parsed.items.append(Item(line=i + 1, text=text, section=section, source="\n".join(lines[i:end])))
            i = end
            continue
        if line.startswith("## "):
            section = line[3:].strip()
        elif line.startswith("# ") and parsed.title is None:
            parsed.title = line[2:].strip()
        parsed.template.append(line)
        i += 1


def _entry(parsed: Parsed, item: Item) -> None:
    """An index bullet must be `[type] summary → topic-file.md`."""
    shape = "an index entry is `- [type] summary → topic-file.md`, type one of user, project, feedback, reference"
    if "\n" in item.text:
        parsed.errors.append(Problem(parsed.name, item.line, "entry-format", "an index entry is one line; " + shape))
        return
    match = _ENTRY.fullmatch(item.text)
    if match is None or match[1] not in TYPES:
        parsed.errors.append(Problem(parsed.name, item.line, "entry-format", shape))
        return
    item.type, rest = match[1], match[2]
    topic = _TOPIC.fullmatch(rest)
    if topic and valid_name(topic[3]) and topic[3] != INDEX:
        item.text, item.topic = topic[1], topic[3]
    else:
        item.text = rest
        parsed.warnings.append(Problem(parsed.name, item.line, "no-topic", "this entry points to no topic file (→ topic-file.md)"))


# --- rendering -------------------------------------------------------------------------------------


def topic_line(text: str) -> str:
    return "- " + text


def index_line(kind: str, summary: str, topic: str | None) -> str:
    return f"- [{kind}] {summary}" + (f" {ARROW} {topic}" if topic else "")


def title_for(name: str) -> str:
    """`user-preferences.md` -> `User Preferences`."""
    return " ".join(word.capitalize() for word in re.split(r"[-_.\s]+", name[:-3]) if word) or name


def render(frontmatter: list | None, template: list, lines: list[str]) -> str:
    """The file's text: frontmatter, then the template with each item number replaced by its line."""
    out: list[str] = []
    if frontmatter is not None:
        out.append("---")
        out.extend(f"{key}: {value}" if key is not None else value for key, value in frontmatter)
        out.append("---")
    out.extend(lines[el] if isinstance(el, int) else el for el in template)
    return "\n".join(out)


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.split("\n") if part.strip()) if "\n" in text else text


def _topic_text(text: str) -> str:
    """Text that parses back as one bullet: later lines indented, blank lines dropped."""
    if "\n" not in text:
        return text
    first, *rest = text.split("\n")
    return "\n".join([first] + [line if line[:1] in (" ", "\t") else "  " + line for line in rest if line.strip()])


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


# --- facts in a folder ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Record:
    """A fact as this module sees it (no ORM)."""

    id: str
    type: str
    content: Any
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Layout:
    """A file's `memory.layout` fact."""

    id: str
    name: str
    content: Any
    updated_at: datetime


@dataclass(frozen=True)
class Role:
    """Where a fact belongs in a folder and what it shows there."""

    kind: str  # "index" | "topic"
    type: str  # user | project | feedback | reference
    file: str
    section: str | None
    text: str
    topic: str | None = None

    @property
    def signature(self) -> tuple:
        return (self.type, self.file, self.section, self.text, self.topic)

    def line(self) -> str:
        return index_line(self.type, self.text, self.topic) if self.kind == "index" else topic_line(self.text)

    def content(self) -> dict:
        """What an import writes for it."""
        body: dict[str, Any] = {"text": self.text, "file": self.file}
        if self.kind == "index":
            body["section"] = self.section
            if self.topic:
                body["topic"] = self.topic
        elif self.section is not None:
            body["section"] = self.section
        return body


def role_of(record: Record) -> Role | None:
    """The role of a markdown fact: from its content's `file` / `section` / `topic`, else defaults."""
    kind = md_type(record.type)
    if kind is None:
        return None
    content = record.content
    file = section = topic = None
    has_section = False
    if isinstance(content, dict):
        text = content["text"] if isinstance(content.get("text"), str) else _json(content)
        file = content.get("file") if valid_name(content.get("file")) else None
        if "section" in content and (content["section"] is None or isinstance(content["section"], str) and "\n" not in content["section"]):
            section, has_section = content["section"], True
        topic = content.get("topic") if valid_name(content.get("topic")) and content.get("topic") != INDEX else None
    else:
        text = content if isinstance(content, str) else _json(content)
    if file == INDEX:
        return Role("index", kind, INDEX, section if has_section else SECTIONS[kind], _one_line(text), topic)
    return Role("topic", kind, file or DEFAULT_TOPICS[kind], section, _topic_text(text))


def item_role(parsed: Parsed, item: Item) -> Role:
    if parsed.is_index:
        return Role("index", item.type, INDEX, item.section, item.text, item.topic)
    return Role("topic", parsed.type, parsed.name, item.section, item.text)


@dataclass
class Slot:
    record: str | None  # the fact's id; None: an index entry made up for a topic line no entry points to
    role: Role
    placed: bool = False  # put here by the file's layout (an import saw it here)


@dataclass
class FileView:
    """One file of the folder as the store holds it now."""

    name: str
    type: str | None  # topic files
    template: list
    slots: list[Slot] = field(default_factory=list)
    frontmatter: list | None = None
    title: str | None = None
    layout: Layout | None = None

    @property
    def is_index(self) -> bool:
        return self.name == INDEX

    def text(self) -> str:
        return render(self.frontmatter, self.template, [slot.role.line() for slot in self.slots])

    def add(self, slot: Slot) -> None:
        self.slots.append(slot)
        _insert(self.template, slot.role.section, len(self.slots) - 1)


def is_heading(element: Any, level: str = "## ") -> bool:
    """Is this element of a file's template a heading of `level` ("## " a section, "# " the title, "#" any)?"""
    return isinstance(element, str) and element.startswith(level)


def _insert(template: list, section: str | None, number: int) -> None:
    """Put item `number` at the end of its section (a new one at the end of the file if none)."""
    heads = [i for i, element in enumerate(template) if is_heading(element)]
    title = None
    if section is None:
        end = heads[0] if heads else len(template)
        title = next((i for i in range(end) if is_heading(template[i], "# ")), None)
        start = title + 1 if title is not None else 0
    else:
        head = next((i for i in heads if template[i][3:].strip() == section), None)
        if head is None:
            if template and template[-1] == "":
                template.pop()
            if template and template[-1] != "":
                template.append("")
            template.extend([f"## {section}", number, ""])
            return
        start = head + 1
        end = next((i for i in heads if i > head), len(template))
    last = None
    for i in range(start, end):
        if isinstance(template[i], int) or template[i].strip():
            last = i
    if last is not None:
        position = last + 1
        template.insert(position, number)
    elif title is not None:
        template[start:start] = ["", number]
        position = start + 1
    else:
        position = start
        template.insert(position, number)
    if position + 1 < len(template) and is_heading(template[position + 1], "#"):
        template.insert(position + 1, "")


def _index_skeleton() -> list:
    template: list = [INDEX_TITLE, ""]
    for kind in TYPES:
        template += [f"## {SECTIONS[kind]}", ""]
    return template


def _layout_shape(layout: Layout) -> tuple[list, list, list | None, str | None] | None:
    """(template, fact ids, frontmatter, title) of a layout fact, or None if it is not one this module wrote."""
    content = layout.content
    if not isinstance(content, dict):
        return None
    template, ids, frontmatter = content.get("template"), content.get("facts"), content.get("frontmatter")
    if not isinstance(template, list) or not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        return None
    if not all(isinstance(el, str) or (isinstance(el, int) and not isinstance(el, bool) and 0 <= el < len(ids)) for el in template):
        return None
    if layout.name != INDEX:
        if not isinstance(frontmatter, list) or not all(
            isinstance(pair, list) and len(pair) == 2 and isinstance(pair[1], str) and (pair[0] is None or isinstance(pair[0], str))
            for pair in frontmatter
        ):
            return None
        if dict((k, v) for k, v in frontmatter if k).get("type") not in TYPES:
            return None
    title = content.get("title") if isinstance(content.get("title"), str) else None
    return template, ids, frontmatter if layout.name != INDEX else None, title


def _utc_day(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).date().isoformat()


def build_folder(records: list[Record], layouts: list[Layout], gone: dict[str, datetime] | None = None) -> dict[str, FileView]:
    """The folder the store holds: `MEMORY.md` first, then topic files by name.

    `records`: the live markdown facts, oldest first; `layouts`: the live layout facts;
    `gone`: when facts a layout still lists stopped being live (for `updated`).
    """
    gone = gone or {}
    roles = {record.id: role for record in records if (role := role_of(record)) is not None}
    by_id = {record.id: record for record in records}
    files: dict[str, FileView] = {}
    placed: set[str] = set()
    layout_ids: dict[str, list[str]] = {}

    for layout in sorted(layouts, key=lambda lay: lay.name):
        if not valid_name(layout.name) or (shape := _layout_shape(layout)) is None:
            continue
        template, ids, frontmatter, title = shape
        kind = None if layout.name == INDEX else dict((k, v) for k, v in frontmatter if k)["type"]
        view = FileView(layout.name, kind, [], frontmatter=[list(pair) for pair in frontmatter] if frontmatter else None,
                        title=title, layout=layout)
        for element in template:
            if isinstance(element, int):
                record_id = ids[element]
                role = roles.get(record_id)
                if role is None or record_id in placed or role.file != view.name or (kind is not None and role.type != kind):
                    continue  # ended, moved to another file, or listed twice: its line is gone from here
                placed.add(record_id)
                view.template.append(len(view.slots))
                view.slots.append(Slot(record_id, role, placed=True))
            else:
                view.template.append(element)
        files[view.name] = view
        layout_ids[view.name] = ids

    if INDEX not in files:
        files[INDEX] = FileView(INDEX, None, _index_skeleton())
    unindexed: list[tuple[str, Slot]] = []
    for record in records:
        role = roles.get(record.id)
        if role is None or record.id in placed:
            continue
        if role.kind == "index":
            files[INDEX].add(Slot(record.id, role))
            continue
        view = _topic_view(files, role)
        slot = Slot(record.id, role)
        view.add(slot)
        unindexed.append((view.name, slot))

    # A topic line no layout knows gets an index entry, while the index has room for one.
    index = files[INDEX]
    for view_name, slot in unindexed:
        entry = Slot(None, Role("index", slot.role.type, INDEX, SECTIONS[slot.role.type], _summary(slot.role, view_name), view_name))
        trial = FileView(INDEX, None, list(index.template), list(index.slots))
        trial.add(entry)
        if len(trial.text().splitlines()) > MAX_INDEX_LINES:
            break
        index.template, index.slots = trial.template, trial.slots

    for view in files.values():
        if not view.is_index:
            _dates(view, by_id, layout_ids.get(view.name, []), gone)
    return {INDEX: files[INDEX], **{name: files[name] for name in sorted(files) if name != INDEX}}


def _topic_view(files: dict[str, FileView], role: Role) -> FileView:
    """The topic file a fact goes to: its own, unless that file holds another type."""
    kind = role.type
    for name in (role.file, DEFAULT_TOPICS[kind], f"{kind}.md", f"{kind}-memory.md"):
        view = files.get(name)
        if view is None:
            view = FileView(name, kind, ["", f"# {title_for(name)}", ""], frontmatter=[["type", kind]], title=title_for(name))
            files[name] = view
        if view.type == kind:
            return view
    raise AssertionError("no topic file for " + kind)  # pragma: no cover (the last name is free of other types)


def _summary(role: Role, file: str) -> str:
    """A topic line's first line, cut so its index entry stays within MAX_ENTRY_CHARS."""
    summary = " ".join(role.text.split("\n")[0].split())
    room = MAX_ENTRY_CHARS - len(index_line(role.type, "", file))
    if len(summary) > room:
        cut = summary[: max(room - 1, 10)]
        if " " in cut[-20:]:
            cut = cut.rsplit(" ", 1)[0]
        summary = cut.rstrip(" ,;:.") + "…"
    return summary


def _dates(view: FileView, by_id: dict[str, Record], layout_ids: list[str], gone: dict[str, datetime]) -> None:
    """Frontmatter `created` / `updated`: as the folder said, `updated` moved on when a line changed since."""
    shown = [(slot, by_id[slot.record]) for slot in view.slots if slot.record in by_id]
    records = [record for _, record in shown]
    values = {key: value for key, value in view.frontmatter or [] if key}
    layout = view.layout
    if layout is None:
        created = _utc_day(min(r.created_at for r in records)) if records else None
        updated = _utc_day(max(r.updated_at for r in records)) if records else None
    else:
        created, updated = values.get("created"), values.get("updated")
        changes = [r.updated_at for slot, r in shown if not slot.placed or r.updated_at > layout.updated_at]
        listed = {slot.record for slot in view.slots}
        for record_id in layout_ids:
            if record_id in listed:
                continue
            when = gone.get(record_id) or (by_id[record_id].updated_at if record_id in by_id else None)
            if when is not None and when > layout.updated_at:
                changes.append(when)
        if changes:
            latest = _utc_day(max(changes))
            if updated is None or not _DATE.match(updated) or latest > updated[:10]:
                updated = latest
        if created is None:
            created = _utc_day(min([r.created_at for r in records] + [layout.updated_at]))
        if updated is None:
            updated = _utc_day(max([r.updated_at for r in records] + [layout.updated_at]))
    pairs = [list(pair) for pair in view.frontmatter or [["type", view.type]]]
    for key, value in (("created", created), ("updated", updated)):
        if value is None:
            continue
        existing = next((pair for pair in pairs if pair[0] == key), None)
        if existing is not None:
            existing[1] = value
        else:
            after = max((i for i, pair in enumerate(pairs) if pair[0] in ("type", "created")), default=len(pairs) - 1)
            pairs.insert(after + 1, [key, value])
    view.frontmatter = pairs


# --- import plan ---------------------------------------------------------------------------------------------


@dataclass
class Step:
    """What an import does for one item of a file, in the file's order."""

    action: str  # keep | update | create
    record: str | None  # keep/update: the fact
    role: Role


@dataclass
class FilePlan:
    name: str
    steps: list[Step]
    ends: list[str]  # facts the file no longer shows (only ones its layout had placed)
    kept_free: list[str]  # facts the folder left out that no layout had placed: kept, not ended
    layout: dict  # the layout content without fact ids (`facts` is filled in after the writes)

    @property
    def changes(self) -> int:
        return sum(step.action != "keep" for step in self.steps) + len(self.ends)


def plan_file(current: FileView | None, parsed: Parsed) -> FilePlan:
    """Line up the file as the store shows it with the file as given: equal lines keep their
    fact, a changed line is its fact's next revision, a new line a new fact, a dropped line
    ends its fact."""
    shown = [current.slots[el] for el in current.template if isinstance(el, int)] if current else []
    old = [slot for slot in shown if slot.record is not None]
    new = [item_role(parsed, item) for item in parsed.items]
    matcher = difflib.SequenceMatcher(None, [s.role.signature for s in old], [r.signature for r in new], autojunk=False)
    steps: list[Step | None] = [None] * len(new)
    dropped: list[Slot] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                steps[j1 + k] = Step("keep", old[i1 + k].record, new[j1 + k])
            continue
        pairs = min(i2 - i1, j2 - j1)
        for k in range(pairs):
            before, after = old[i1 + k], new[j1 + k]
            if before.role.type == after.type:
                steps[j1 + k] = Step("update", before.record, after)
            else:  # a fact's type never changes: the old one ends, a new one starts
                steps[j1 + k] = Step("create", None, after)
                dropped.append(before)
        for k in range(pairs, j2 - j1):
            steps[j1 + k] = Step("create", None, new[j1 + k])
        dropped.extend(old[i1 + pairs:i2])
    layout = {"text": "", "file": parsed.name, "title": parsed.title, "template": parsed.template}
    if not parsed.is_index:
        layout["frontmatter"] = parsed.frontmatter
    return FilePlan(
        name=parsed.name, steps=[s for s in steps if s is not None],
        ends=[s.record for s in dropped if s.placed], kept_free=[s.record for s in dropped if not s.placed], layout=layout,
    )


# --- lint ----------------------------------------------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an and are as at be by for from has have i in is it of on or our the to uses use user with".split())


def _words(text: str) -> set[str]:
    return {w.rstrip("s") if len(w) > 3 else w for w in _WORD.findall(text.lower()) if w not in _STOP}


def lint(files: dict[str, str]) -> dict:
    """Check a folder against the seed's rules. Reads only: it never moves, merges or deletes.

    Problems: an index over 200 lines, entries over ~150 characters, lines an import would
    refuse, entries pointing to missing topic files. Suggestions: merging near-duplicate
    entries (and, over the limit, entries that share a topic file), archiving the oldest
    topic files to memory/archive/.
    """
    problems: list[Problem] = []
    warnings: list[Problem] = []
    suggestions: list[dict] = []
    parsed = {name: parse(name, text) for name, text in files.items()}
    for item in parsed.values():
        problems.extend(item.errors)
        warnings.extend(item.warnings)
    index = parsed.get(INDEX)
    lines = len(files[INDEX].replace("\r\n", "\n").splitlines()) if INDEX in files else 0
    entries = index.items if index is not None else []
    if index is None:
        problems.append(Problem(INDEX, None, "no-index", "MEMORY.md is missing: the index every session reads first"))
    if lines > MAX_INDEX_LINES:
        problems.append(Problem(INDEX, None, "index-too-long", f"Memory index is getting large ({lines} lines). Review recommended."))
    for item in entries:
        first = item.source.split("\n")[0]
        if len(first) > MAX_ENTRY_CHARS:
            problems.append(Problem(
                INDEX, item.line, "entry-too-long",
                f"entry is {len(first)} characters (~{MAX_ENTRY_CHARS} max): keep the detail in its topic file",
            ))
        if item.topic and item.topic not in files:
            problems.append(Problem(INDEX, item.line, "missing-topic", f"points to {item.topic}, which is not in the folder"))
        if item.type and item.section and item.section != SECTIONS[item.type]:
            warnings.append(Problem(INDEX, item.line, "section", f"a [{item.type}] entry under ## {item.section} (its section is ## {SECTIONS[item.type]})"))
    pointed = {item.topic for item in entries if item.topic}
    for name in files:
        if name != INDEX and name not in pointed and name in parsed and not parsed[name].errors:
            suggestions.append({"code": "unindexed-topic", "files": [name],
                                "message": f"no index entry points to {name}: add `- [type] summary → {name}` to MEMORY.md"})
    suggestions += _merge_suggestions(entries, over=lines > MAX_INDEX_LINES)
    if lines > MAX_INDEX_LINES:
        suggestions += _archive_suggestions(parsed, entries, lines - MAX_INDEX_LINES)
    return {
        "ok": not problems,
        "indexLines": lines,
        "entries": len(entries),
        "problems": [p.as_dict() for p in problems],
        "warnings": [w.as_dict() for w in warnings],
        "suggestions": suggestions,
        "changed": "nothing: lint only reads (never deletes, moves or merges; do that yourself, then import)",
    }


def _merge_suggestions(entries: list[Item], *, over: bool) -> list[dict]:
    out: list[dict] = []
    typed = [item for item in entries if item.type]
    seen: set[int] = set()
    for i, a in enumerate(typed):
        for b in typed[i + 1:]:
            wa, wb = _words(a.text), _words(b.text)
            if a.type == b.type and wa and wb and len(wa & wb) / len(wa | wb) >= 0.5:
                out.append({"code": "merge", "lines": [a.line, b.line],
                            "message": f"lines {a.line} and {b.line} say nearly the same: merge them into one entry"})
                seen.update((a.line, b.line))
    if over:  # the prune step: related entries, i.e. several pointing to the same topic file
        groups: dict[tuple, list[Item]] = {}
        for item in typed:
            if item.topic and item.line not in seen:
                groups.setdefault((item.type, item.topic), []).append(item)
        for (kind, topic), group in groups.items():
            if len(group) > 1:
                out.append({"code": "merge", "lines": [item.line for item in group],
                            "message": f"{len(group)} [{kind}] entries point to {topic}: merge them into one line"})
    return out


def _archive_suggestions(parsed: dict[str, Parsed], entries: list[Item], excess: int) -> list[dict]:
    """The oldest topic files (by `updated`) whose entries would bring the index back under the limit."""
    per_topic: dict[str, int] = {}
    for item in entries:
        if item.topic:
            per_topic[item.topic] = per_topic.get(item.topic, 0) + 1

    def updated(name: str) -> str:
        topic = parsed.get(name)
        values = dict((k, v) for k, v in (topic.frontmatter or []) if k) if topic else {}
        return values.get("updated") or values.get("created") or ""

    out, freed = [], 0
    for name in sorted(per_topic, key=lambda n: (updated(n), n)):
        if freed >= excess:
            break
        freed += per_topic[name]
        out.append({
            "code": "archive", "files": [name],
            "message": f"move {name} (updated {updated(name) or 'unknown'}) to {ARCHIVE}/ and its {per_topic[name]} "
                       f"index entries out of MEMORY.md (ask the user first; nothing is deleted)",
        })
    return out
