"""Claude's memory tool (`memory_20250818`) served from markdown memory (seed 004).

The tool's six commands — `view`, `create`, `str_replace`, `insert`, `delete`, `rename`
over files under `/memories` — act on one folder of profiles.markdown_memory: a person's
(`participant`), a namespace's, or the project's own. `/memories` is that folder:
`MEMORY.md` (the index, always there) and its topic files, flat, named like
`topic-name.md`. Every edit goes through the markdown import, so each changed line is its
fact's next revision, a new line a new fact, a dropped line ends its fact; the file's
`memory.layout` fact keeps the rest. On top of the import:

- The memory gate: a new or changed line that reads like an instruction
  (approvals.gate.judge, as the remember tool uses it) is not written as it
  is. It waits as a pending fact with an approval request, the file keeps what it had
  there, and the answer says so; once approved, the line shows in its file.
- `MEMORY.md` holds at most 200 lines (the seed's rule): an edit that makes it longer is
  refused, saying to merge entries or move detail to topic files.
- Paths stay under `/memories`: `..` that climbs out is refused with the tool's own error
  text, as are subfolders and files that are not `.md`.
- A topic file created without frontmatter gets `type:` from its name (user, project,
  feedback, reference; else reference) so the model's plain notes are taken.

Answers are the tool's result text as Anthropic's reference implementation
(anthropic.lib.tools.BetaLocalFilesystemMemoryTool) words it; refusals raise
MemoryToolError whose detail is the text the model is shown.
"""

from __future__ import annotations

import dataclasses
import posixpath
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from accounts.services import Principal, Role
from approvals import gate
from core.errors import ApplicationError, ValidationFailed
from facts.content import name_problem
from facts.models import Status, Trust
from facts.services import Provenance, acting_user, fact_delete, fact_supersede, fact_write
from profiles import markdown as md, markdown_memory

ROOT = "/memories"
COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
NAMESPACE_PREFIX = "namespace:"
PARTICIPANT_PREFIX = "participant:"
LINE_NUMBER_WIDTH = 6  # as the SDK's reference implementation numbers lines
_FIELDS = {
    "view": ({"path"}, {"view_range"}),
    "create": ({"path", "file_text"}, set()),
    "str_replace": ({"path", "old_str", "new_str"}, set()),
    "insert": ({"path", "insert_line", "insert_text"}, set()),
    "delete": ({"path"}, set()),
    "rename": ({"old_path", "new_path"}, set()),
}


class MemoryToolError(ApplicationError):
    """A command the tool refuses; `detail` is the text the model is shown."""

    status, code, title = 400, "memory-tool-error", "Memory tool error"


@dataclass
class Held:
    """A line the memory gate kept back for a person to approve."""

    file: str
    line: str
    fact_id: str
    approval_id: str
    reasons: list[dict]

    def as_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "factId": self.fact_id, "approvalId": self.approval_id, "reasons": self.reasons}


@dataclass
class Result:
    text: str
    held: list[Held] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"text": self.text, "held": [h.as_dict() for h in self.held]}


# --- whose memory --------------------------------------------------------------------------------


def folder_for(*, principal: Principal, who: str, project_id: Any = None) -> markdown_memory.Folder:
    """The folder `{who}` names: `namespace:NAME`, `participant:ID`, or a bare participant id."""
    if who.startswith(NAMESPACE_PREFIX):
        namespace = who[len(NAMESPACE_PREFIX):]
        if problem := name_problem(namespace, "namespace"):
            raise ValidationFailed(problem, errors={"namespace": [problem]})
        if principal.participant_id is not None:
            raise ValidationFailed(
                "This key is bound to a participant: it reaches only that person's memory, not a namespace's.",
                errors={"namespace": ["a participant-bound key names its participant"]},
            )
        return markdown_memory.folder(principal=principal, project_id=project_id, namespace=namespace)
    participant = who[len(PARTICIPANT_PREFIX):] if who.startswith(PARTICIPANT_PREFIX) else who
    return markdown_memory.folder(principal=principal, participant_id=participant, project_id=project_id)


# --- paths ---------------------------------------------------------------------------------------


def _file_name(path: Any, *, field_name: str = "path") -> str | None:
    """The file a path names (None: `/memories` itself), or the tool's error text."""
    if not isinstance(path, str) or not path:
        raise ValidationFailed(f"{field_name} must be a path under {ROOT}", errors={field_name: ["a path under /memories"]})
    if not path.startswith(ROOT):
        raise MemoryToolError(f"Path must start with {ROOT}, got: {path}")
    normal = posixpath.normpath(path.replace("\\", "/"))
    if normal == ROOT:
        return None
    if not normal.startswith(ROOT + "/") or path[len(ROOT)] not in "/":
        raise MemoryToolError(f"Path {path} would escape {ROOT} directory")
    name = normal[len(ROOT) + 1:]
    if "/" in name:
        raise MemoryToolError(
            f"The path {path} is in a subfolder: memoryhub keeps {ROOT} flat. "
            f"Use a file directly under it, e.g. {ROOT}/{name.rsplit('/', 1)[-1]}"
        )
    if not md.valid_name(name):
        raise MemoryToolError(
            f"The path {path} is not a memory file: name files like {ROOT}/topic-name.md "
            "(letters, digits and _ . @ + -, ending in .md)."
        )
    return name


def _new_file_name(path: Any, *, field_name: str = "path") -> str | None:
    """`_file_name` for a file about to be named (create, rename's destination): a file name is
    shown to the model in every listing, so one the gate would hold as a label is refused."""
    name = _file_name(path, field_name=field_name)
    if name is not None and (reasons := gate.judge_label(name).reasons):
        raise MemoryToolError(
            f"The name {path} was refused: a file name is shown to the model, and this one matched the memory gate's "
            f"{reasons[0]['rule']!r} rule ({reasons[0]['match']!r}). Nothing was written; name the file by its topic, "
            f"e.g. {ROOT}/user-preferences.md"
        )
    return name


def _numbered(lines: list[str], start: int) -> str:
    return "\n".join(f"{str(number).rjust(LINE_NUMBER_WIDTH)}\t{line}" for number, line in enumerate(lines, start))


def _missing(path: str) -> MemoryToolError:
    return MemoryToolError(f"The path {path} does not exist. Please provide a valid path.")


# --- reading ------------------------------------------------------------------------------------


_files = markdown_memory.current_folder  # (files by name, facts by id); MEMORY.md is always among the files


def _exists(views: dict[str, md.FileView], name: str) -> bool:
    """Whether a file is there to edit; the index no one wrote yet (only its skeleton) may be created."""
    view = views.get(name)
    return view is not None and not (view.is_index and view.layout is None and not view.slots)


def _text(views: dict[str, md.FileView], name: str, path: str) -> str:
    if name not in views:
        raise _missing(path)
    return views[name].text()


def view(*, scope: markdown_memory.Folder, path: Any, view_range: Any = None) -> Result:
    name = _file_name(path)
    views, _ = _files(scope)
    if name is None:
        texts = {file: view.text() for file, view in views.items()}
        total = sum(len(text.encode()) for text in texts.values())
        lines = [f"{_size(total)}\t{path}"] + [f"{_size(len(text.encode()))}\t{ROOT}/{file}" for file, text in texts.items()]
        return Result(f"Here're the files and directories up to 2 levels deep in {path}, excluding hidden items:\n" + "\n".join(lines))
    lines = _text(views, name, path).split("\n")
    start = 1
    if view_range is not None:
        if (not isinstance(view_range, list) or len(view_range) != 2
                or not all(isinstance(n, int) and not isinstance(n, bool) for n in view_range)):
            raise ValidationFailed("view_range is [first line, last line] (last -1: to the end)", errors={"view_range": ["[start, end]"]})
        start = max(1, view_range[0])
        end = len(lines) if view_range[1] == -1 else view_range[1]
        lines = lines[start - 1:end]
    return Result(f"Here's the content of {path} with line numbers:\n" + _numbered(lines, start))


def _size(size: int) -> str:
    if size < 1024:
        return f"{size}B"
    value = size / 1024
    return f"{int(value)}K" if value == int(value) else f"{value:.1f}K"


# --- writing one file -------------------------------------------------------------------------------


def _default_type(name: str) -> str:
    for kind, topic in md.DEFAULT_TOPICS.items():
        if name == topic or name.startswith(kind):
            return kind
    return "reference"


def _with_frontmatter(name: str, text: str) -> tuple[str, str | None]:
    """A topic file's text with frontmatter: as given, or with `type:` added from its name."""
    if name == md.INDEX or text.startswith("---"):
        return text, None
    kind = _default_type(name)
    return f"---\ntype: {kind}\n---\n{text}", kind


def _problem_text(parsed: md.Parsed, path: str) -> str:
    problem = parsed.errors[0]
    where = f" line {problem.line}" if problem.line else ""
    return f"memoryhub could not keep {path}:{where}: {problem.message}. Nothing was written."


def _judge_prose(element: str) -> list[dict]:
    """A heading is judged by its words, not by the markup around them; a short one is a label."""
    words = element.lstrip("#").strip() or element
    return (gate.judge_label(words) if md.is_heading(element, "#") else gate.judge(words)).reasons


def _judge_line(role: md.Role) -> list[dict]:
    """A line's text, and the topic file an index entry points to: a file name is a label. The
    name is not in the fact's text, so its reasons carry no span a reviewer's view could mark."""
    named = gate.judge_label(role.topic).reasons if role.topic else []
    return gate.judge(role.text).reasons + [{k: v for k, v in r.items() if k not in ("start", "end")} for r in named]


def _withhold(current: md.FileView | None, parsed: md.Parsed) -> tuple[str, list[tuple[md.Role, str, list[dict]]]]:
    """The file's text without the new lines the memory gate holds, and those lines."""

    plan = md.plan_file(current, parsed)
    old_lines = {slot.record: slot.role.line() for slot in (current.slots if current else []) if slot.record}
    old_prose = {el for el in (current.template if current else []) if isinstance(el, str)}
    held: list[tuple[md.Role, str, list[dict]]] = []
    lines: list[str] = []
    for element in parsed.template:
        if isinstance(element, str):
            reasons = [] if element in old_prose or not element.strip() else _judge_prose(element)
            if reasons:  # prose that reads like an instruction waits as a line of the file's type
                kind = parsed.type or "reference"
                text = element.lstrip("#").strip()
                role = md.Role("index", kind, md.INDEX, md.SECTIONS[kind], text) if parsed.is_index else md.Role("topic", kind, parsed.name, None, text)
                held.append((role, element, reasons))
            else:
                lines.append(element)
            continue
        item, step = parsed.items[element], plan.steps[element]
        reasons = _judge_line(step.role) if step.action != "keep" else []
        if not reasons:
            lines.append(item.source)
            continue
        held.append((step.role, item.source, reasons))
        if step.action == "update" and step.record in old_lines:
            lines.append(old_lines[step.record])  # the line keeps what it said until a person approves
    out: list[str] = []
    if parsed.frontmatter is not None:  # frontmatter is layout too: a new line of it passes the same gate
        old_front = {f"{k}: {v}" if k is not None else v for k, v in (current.frontmatter if current else None) or []}
        out.append("---")
        for key, value in parsed.frontmatter:
            line = f"{key}: {value}" if key is not None else value
            keep = line in old_front or key == "type"  # the parser refuses any type but the four
            reasons = [] if keep else (gate.judge_label(line) if key is not None else gate.judge(line)).reasons
            if reasons:
                held.append((md.Role("topic", parsed.type or "reference", parsed.name, None, line), line, reasons))
            else:
                out.append(line)
        out.append("---")
    return "\n".join(out + lines), held


def _hold(scope: markdown_memory.Folder, role: md.Role, reasons: list[dict]) -> tuple[str, str]:
    """Write the held line as a pending fact and ask for approval: (fact id, approval id)."""
    principal = scope.principal
    who = acting_user(principal)
    provenance = Provenance(trust=Trust.UNVERIFIED, attributed_to=who, status=Status.PENDING)
    data = markdown_memory.fact_input(scope, md.fact_type(role.type), role.content())
    fact, _ = fact_write(principal=principal, data=data, provenance=provenance)
    approval = gate.hold(fact=fact, verdict=gate.Verdict(reasons), requested_by=who)
    return str(fact.id), str(approval.id)


def _write(scope: markdown_memory.Folder, views: dict[str, md.FileView], name: str, text: str, path: str) -> tuple[list[Held], str]:
    """Make file `name` hold `text` (the gate's lines held back), in the caller's transaction
    and under its lock (`views`: the folder it read there); returns the held lines and the text kept."""
    parsed = md.parse(name, text)
    if parsed.errors:
        raise MemoryToolError(_problem_text(parsed, path))
    if name == md.INDEX and len(text.rstrip("\n").split("\n")) > md.MAX_INDEX_LINES:
        count = len(text.rstrip("\n").split("\n"))
        raise MemoryToolError(
            f"{path} would be {count} lines; the index holds at most {md.MAX_INDEX_LINES}. Nothing was written: "
            "merge related entries or move detail into topic files, then try again."
        )
    kept, held_lines = _withhold(views.get(name), parsed)
    markdown_memory.markdown_import(scope=scope, files={name: kept})
    held = []
    for role, line, reasons in held_lines:
        fact_id, approval_id = _hold(scope, role, reasons)
        held.append(Held(name, line, fact_id, approval_id, reasons))
    return held, kept


def _held_note(held: list[Held]) -> str:
    if not held:
        return ""
    lines = "\n".join(f"  {h.line.strip()}" for h in held)
    return (f"\n\nHeld for approval ({len(held)} line{'s' if len(held) != 1 else ''}: it reads like an instruction, not a memory). "
            f"It shows in the file once a person approves it:\n{lines}")


# --- the commands ----------------------------------------------------------------------------------


def create(*, scope: markdown_memory.Folder, path: Any, file_text: Any) -> Result:
    scope.principal.require(Role.WRITER)
    name = _new_file_name(path)
    if name is None:
        raise MemoryToolError(f"{ROOT} is a directory: create a file in it, e.g. {ROOT}/notes.md")
    if not isinstance(file_text, str):
        raise ValidationFailed("file_text must be a string", errors={"file_text": ["a string"]})
    with transaction.atomic():
        markdown_memory.lock(scope)
        views, _ = _files(scope)
        if _exists(views, name):
            raise MemoryToolError(f"File {path} already exists")
        text, kind = _with_frontmatter(name, file_text)
        held, _ = _write(scope, views, name, text, path)
    note = f" (memoryhub filed it as type: {kind}; edit its frontmatter to change that)" if kind else ""
    return Result(f"File created successfully at: {path}{note}{_held_note(held)}", held)


def str_replace(*, scope: markdown_memory.Folder, path: Any, old_str: Any, new_str: Any) -> Result:
    scope.principal.require(Role.WRITER)
    name = _file_name(path)
    if name is None:
        raise MemoryToolError(f"The path {path} is not a file.")
    if not isinstance(old_str, str) or not old_str or not isinstance(new_str, str):
        raise ValidationFailed("old_str (not empty) and new_str must be strings", errors={"old_str": ["a string"], "new_str": ["a string"]})
    with transaction.atomic():
        markdown_memory.lock(scope)
        views, _ = _files(scope)
        content = _text(views, name, path)
        count = content.count(old_str)
        if count == 0:
            raise MemoryToolError(f"No replacement was performed, old_str `{old_str}` did not appear verbatim in {path}.")
        if count > 1:
            starts, at = [], content.find(old_str)
            while at >= 0:
                starts.append(content[:at].count("\n") + 1)
                at = content.find(old_str, at + 1)
            raise MemoryToolError(
                f"No replacement was performed. Multiple occurrences of old_str `{old_str}` in lines: "
                f"{', '.join(map(str, starts))}. Please ensure it is unique"
            )
        changed = content[:content.find(old_str)].count("\n")
        held, kept = _write(scope, views, name, content.replace(old_str, new_str), path)
    after = kept.split("\n")
    first = max(0, changed - 2)
    snippet = _numbered(after[first:min(len(after), changed + 3)], first + 1)
    return Result("The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
                  + snippet + _held_note(held), held)


def insert(*, scope: markdown_memory.Folder, path: Any, insert_line: Any, insert_text: Any) -> Result:
    scope.principal.require(Role.WRITER)
    name = _file_name(path)
    if name is None:
        raise MemoryToolError(f"The path {path} is not a file.")
    if not isinstance(insert_line, int) or isinstance(insert_line, bool) or not isinstance(insert_text, str):
        raise ValidationFailed("insert_line is a line number and insert_text a string",
                               errors={"insert_line": ["an integer"], "insert_text": ["a string"]})
    with transaction.atomic():
        markdown_memory.lock(scope)
        views, _ = _files(scope)
        lines = _text(views, name, path).split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if not 0 <= insert_line <= len(lines):
            raise MemoryToolError(f"Invalid `insert_line` parameter: {insert_line}. It should be within the range [0, {len(lines)}].")
        lines.insert(insert_line, insert_text.rstrip("\n"))
        held, _ = _write(scope, views, name, "\n".join(lines) + "\n", path)
    return Result(f"The file {path} has been edited.{_held_note(held)}", held)


def delete(*, scope: markdown_memory.Folder, path: Any) -> Result:
    scope.principal.require(Role.WRITER)
    name = _file_name(path)
    if name is None:
        raise MemoryToolError(f"Cannot delete the {ROOT} directory itself")
    with transaction.atomic():
        markdown_memory.lock(scope)
        views, _ = _files(scope)
        if not _exists(views, name):
            raise MemoryToolError(f"The path {path} does not exist")
        view_ = views[name]
        for fact_id in [slot.record for slot in view_.slots if slot.record] + ([view_.layout.id] if view_.layout else []):
            fact_delete(principal=scope.principal, fact_id=fact_id)
    return Result(f"Successfully deleted {path}")


def rename(*, scope: markdown_memory.Folder, old_path: Any, new_path: Any) -> Result:
    """Move a topic file: its lines keep their facts (each a next revision naming the new
    file), index entries that pointed to it point to the new name."""
    scope.principal.require(Role.WRITER)
    old = _file_name(old_path, field_name="old_path")
    new = _new_file_name(new_path, field_name="new_path")
    if old is None:
        raise MemoryToolError(f"Cannot rename the {ROOT} directory itself")
    if new is None:
        raise MemoryToolError(f"The destination {new_path} already exists")
    if md.INDEX in (old, new):
        raise MemoryToolError(f"{ROOT}/{md.INDEX} is the index: it keeps its name, and no file can take it.")
    principal = scope.principal
    with transaction.atomic():
        markdown_memory.lock(scope)
        views, by_id = _files(scope)
        if not _exists(views, old):
            raise MemoryToolError(f"The path {old_path} does not exist")
        if _exists(views, new):
            raise MemoryToolError(f"The destination {new_path} already exists")
        source = views[old]
        for slot in source.slots:
            fact = by_id[slot.record]
            content = dataclasses.replace(slot.role, file=new).content()
            fact_supersede(principal=principal, fact_id=fact.id, content=content, expect_version=fact.version)
        for slot in views[md.INDEX].slots:
            if slot.record and slot.role.topic == old:
                fact = by_id[slot.record]
                content = dataclasses.replace(slot.role, topic=new).content()
                fact_supersede(principal=principal, fact_id=fact.id, content=content, expect_version=fact.version)
        layout = {"text": "", "file": new, "title": source.title, "template": source.template,
                  "frontmatter": source.frontmatter, "facts": [slot.record for slot in source.slots]}
        fact_write(principal=principal, data=markdown_memory.fact_input(scope, md.LAYOUT_TYPE, layout, key=new))
        if source.layout is not None:
            fact_delete(principal=principal, fact_id=source.layout.id)
    return Result(f"Successfully renamed {old_path} to {new_path}")


def run_command(*, scope: markdown_memory.Folder, command: Any) -> Result:
    """One tool call, `command` as the model sent it (`{"command": "view", "path": ...}`)."""
    if not isinstance(command, dict) or command.get("command") not in COMMANDS:
        raise ValidationFailed(f"command must be one of {', '.join(COMMANDS)}", errors={"command": list(COMMANDS)})
    kind = command["command"]
    required, optional = _FIELDS[kind]
    given = set(command) - {"command"}
    if missing := sorted(required - given):
        raise ValidationFailed(f"{kind} needs {', '.join(missing)}", errors={name: ["required"] for name in missing})
    if unknown := sorted(given - required - optional):
        raise ValidationFailed(f"{unknown[0]} is not a field of {kind}", errors={name: ["not a field here"] for name in unknown})
    arguments = {name: command[name] for name in given}
    return {"view": view, "create": create, "str_replace": str_replace, "insert": insert,
            "delete": delete, "rename": rename}[kind](scope=scope, **arguments)
