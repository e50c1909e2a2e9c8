"""Markdown memory (seed 004): MEMORY.md and topic files as a view of the fact store.

The seed's example index and a folder written by hand in its format come back byte for
byte; export -> import -> export is byte-identical; importing twice changes nothing; a
changed topic line is its fact's next revision; the four types map onto fact types and
back; lint holds the 200-line / ~150-character limits and never changes anything; the CLI
does all of it against a live server.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from pathlib import Path

import pytest

from facts.models import Fact, FactRevision
from profiles import markdown as md
from tests.test_cli import cli, failed, ok

SEED = Path(__file__).parent / "data" / "markdown_seed"
SEED_INDEX = """# Memory Index

## User
- [user] Prefers dark mode, uses Windows 11, PowerShell → user-preferences.md
- [user] Senior DevOps engineer, 8 years experience → user-preferences.md
- [user] Primary language: English, sometimes Turkish → user-preferences.md

## Project
- [project] Always use bun instead of npm → project-conventions.md
- [project] Tailwind v4 preferred, no v3 → tech-decisions.md
- [project] No purple/violet colors in UI → project-conventions.md

## Feedback
- [feedback] User likes concise responses, no filler → feedback-history.md
- [feedback] User dislikes verbose explanations → feedback-history.md
- [feedback] User prefers tables over bullet lists → feedback-history.md

## Reference
- [reference] Squid proxy runs on port 3128 → infrastructure-notes.md
- [reference] Git workflow: feature branches → main → project-conventions.md
"""


def seed_folder() -> dict[str, str]:
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(SEED.glob("*.md"))}


def import_folder(client, files: dict[str, str], participant: str | None = None, status: int = 200) -> dict:
    body = {"files": [{"name": name, "text": text} for name, text in files.items()]}
    if participant:
        body["participantId"] = participant
    response = client.post("/v1/markdown/import", body, format="json")
    assert response.status_code == status, response.content
    return response.json()


def export_folder(client, participant: str | None = None) -> dict[str, str]:
    response = client.get("/v1/markdown", {"participantId": participant} if participant else {})
    assert response.status_code == 200, response.content
    return {item["name"]: item["text"] for item in response.json()["files"]}


def revisions() -> int:
    from core import scoping

    with scoping.scopes_disabled():
        return FactRevision.objects.count()


def today() -> str:
    return datetime.now(timezone.utc).date().isoformat()


# --- the seed's example, and a folder written by hand -------------------------------------------------


@pytest.mark.django_db
def test_the_seed_example_folder_comes_back_byte_for_byte(world, in_scope):
    client = world.client()
    assert seed_folder()["MEMORY.md"] == SEED_INDEX  # the data file is the seed's example, as written
    report = import_folder(client, seed_folder())
    assert (report["created"], report["updated"], report["unchanged"], report["removed"]) == (29, 0, 0, 0)

    assert export_folder(client) == seed_folder()
    index = client.get("/v1/markdown/MEMORY.md")
    assert index.status_code == 200 and index["Content-Type"] == "text/markdown; charset=utf-8"
    assert index.content.decode() == SEED_INDEX
    assert client.get("/v1/markdown/user-preferences.md").content.decode() == seed_folder()["user-preferences.md"]
    assert client.get("/v1/markdown/nothing-here.md").status_code == 404

    # What the facts are: 11 index entries of their own types, 18 topic lines of their file's type.
    facts = Fact.objects.filter(project=world.desk, participant_id__isnull=True)
    entries = [f for f in facts.exclude(type="memory.layout") if f.content.get("file") == "MEMORY.md"]
    assert sorted(f.type for f in entries) == sorted(
        ["memory.user"] * 3 + ["memory.project"] * 3 + ["memory.feedback"] * 3 + ["memory.reference"] * 2
    )
    squid = next(f for f in entries if "Squid" in f.content["text"])
    assert squid.content == {"text": "Squid proxy runs on port 3128", "file": "MEMORY.md", "section": "Reference", "topic": "infrastructure-notes.md"}
    shell = facts.get(content__text="Shell: PowerShell")
    assert (shell.type, shell.content) == ("memory.user", {"text": "Shell: PowerShell", "file": "user-preferences.md", "section": "Development Environment"})
    assert facts.filter(type="memory.layout").count() == 6
    # ... and they are facts like any other: searchable by their text.
    found = client.get("/v1/facts", {"q": "proxy", "type": "memory.reference"}).json()["data"]
    assert {f["content"]["text"] for f in found} == {"Squid proxy runs on port 3128"}


HAND_WRITTEN = {
    "MEMORY.md": (
        "# Memory Index\n"
        "\n"
        "Read this first; details live in the topic files.\n"
        "\n"
        "## User\n"
        "- [user] Works from Lisbon, UTC+0 -> user-preferences.md\n"
        "- [user]   Night owl, best after 20:00 → user-preferences.md\n"
        "\n"
        "## Project\n"
        "- [project] Monorepo managed with pnpm workspaces → project-conventions.md\n"
        "- [project] Deploys go through the staging cluster first\n"
    ),
    "user-preferences.md": (
        "---\n"
        "type: user\n"
        "created: 2026-03-02\n"
        "owner: sam\n"
        "---\n"
        "# User Preferences\n"
        "\n"
        "Collected from conversations; newest last.\n"
        "\n"
        "## Schedule\n"
        "* Works from Lisbon\n"
        "- Night owl:\n"
        "  - best focus after 20:00\n"
        "  - no meetings before 10:00\n"
        "\n"
        "## Setup\n"
        "- Terminal: WezTerm\n"
        "```sh\n"
        "- not a memory, just code\n"
        "```\n"
    ),
    "project-conventions.md": (
        "---\n"
        "type: project\n"
        "created: 2026-03-02\n"
        "updated: 2026-03-09\n"
        "---\n"
        "\n"
        "# Project Conventions\n"
        "\n"
        "- pnpm workspaces, one package per service\n"
        "- Commit messages in the imperative mood\n"
    ),
}


@pytest.mark.django_db
def test_a_folder_written_by_hand_comes_back_as_export_writes_it(world, in_scope):
    client = world.client()
    import_folder(client, HAND_WRITTEN)
    out = export_folder(client)
    # Lines in the seed's form come back as written; the rest in the canonical form: `-`
    # bullets, `→` arrows, one space after the type; the missing `updated` date is added.
    assert out["project-conventions.md"] == HAND_WRITTEN["project-conventions.md"]
    assert out["MEMORY.md"] == HAND_WRITTEN["MEMORY.md"].replace(" -> ", " → ").replace("]   Night", "] Night")
    assert out["user-preferences.md"] == (
        HAND_WRITTEN["user-preferences.md"].replace("* Works", "- Works")
        .replace("created: 2026-03-02\n", f"created: 2026-03-02\nupdated: {today()}\n")
    )
    # Prose, code blocks and the nested bullets are kept; only bullets became facts.
    with_nested = Fact.objects.filter(type="memory.user", content__file="user-preferences.md", content__text__startswith="Night owl")
    assert [f.content["text"] for f in with_nested] == ["Night owl:\n  - best focus after 20:00\n  - no meetings before 10:00"]
    # From the canonical form on, nothing changes any more.
    before = revisions()
    report = import_folder(client, out)
    assert (report["created"], report["updated"], report["removed"]) == (0, 0, 0)
    assert export_folder(client) == out
    assert import_folder(client, out)["unchanged"] == report["unchanged"] and revisions() - before <= 2  # at most the two layouts


# --- round trips and idempotence ---------------------------------------------------------------------


def _write_through_the_api(client, participant: str | None = None) -> None:
    scope = {"participantId": participant} if participant else {}
    for kind, content in [
        ("memory.user", "Prefers dark mode"),
        ("memory.user", {"text": "Uses bun, never npm", "section": "Tooling"}),
        ("memory.project", {"text": "Tailwind v4 only", "file": "tech-decisions.md", "section": "Styling"}),
        ("memory.feedback", "Likes short answers\nand tables over lists"),
        ("memory.reference", {"text": "Grafana runs on port 3000", "file": "MEMORY.md", "topic": "infrastructure.md"}),
        ("memory.reference", "x" * 400),
    ]:
        response = client.post("/v1/facts", {"type": kind, "content": content, "scope": scope}, format="json")
        assert response.status_code == 201, response.content


@pytest.mark.django_db
def test_export_import_export_is_byte_identical(world):
    client = world.client()
    _write_through_the_api(client, participant="end-7")
    first = export_folder(client, participant="end-7")
    assert set(first) == {"MEMORY.md", "user-preferences.md", "tech-decisions.md", "feedback-history.md", "reference-notes.md"}
    assert "- [reference] Grafana runs on port 3000 → infrastructure.md" in first["MEMORY.md"]
    assert "- [user] Prefers dark mode → user-preferences.md" in first["MEMORY.md"]  # made up for a line no entry pointed to
    assert all(len(line) <= md.MAX_ENTRY_CHARS for line in first["MEMORY.md"].splitlines())
    assert "- Likes short answers\n  and tables over lists\n" in first["feedback-history.md"]
    assert first["tech-decisions.md"].startswith(f"---\ntype: project\ncreated: {today()}\nupdated: {today()}\n---\n\n# Tech Decisions\n")

    # Into another participant (a fresh store for that folder) and out again: the same bytes.
    import_folder(client, first, participant="end-8")
    assert export_folder(client, participant="end-8") == first
    # Into the same folder: the export is unchanged, and a second import writes nothing.
    import_folder(client, first, participant="end-7")
    assert export_folder(client, participant="end-7") == first
    before = revisions()
    report = import_folder(client, first, participant="end-7")
    assert (report["created"], report["updated"], report["removed"]) == (0, 0, 0)
    assert revisions() == before
    assert export_folder(client, participant="end-7") == first
    # The one thing lint finds: the entry written through the API points to a topic file nobody wrote.
    assert [(p["code"], p["line"]) for p in md.lint(first)["problems"]] == [("missing-topic", 14)]


@pytest.mark.django_db
def test_importing_twice_changes_nothing(world):
    client = world.client()
    import_folder(client, seed_folder())
    before = revisions()
    report = import_folder(client, seed_folder())
    assert (report["created"], report["updated"], report["unchanged"], report["removed"]) == (0, 0, 29, 0)
    assert revisions() == before


@pytest.mark.django_db
def test_a_changed_topic_line_becomes_a_new_revision(world, in_scope):
    client = world.client()
    import_folder(client, seed_folder())
    shell = Fact.objects.get(content__text="Shell: PowerShell")
    edited = seed_folder()
    edited["user-preferences.md"] = edited["user-preferences.md"].replace("Shell: PowerShell", "Shell: bash").replace(
        "- Dislikes verbose explanations\n", "- Dislikes verbose explanations\n- Wants sources linked\n"
    )
    edited["feedback-history.md"] = edited["feedback-history.md"].replace("- Tables for comparisons\n", "")
    report = import_folder(client, edited)
    assert (report["created"], report["updated"], report["removed"]) == (1, 1, 1)

    shell.refresh_from_db()
    assert (shell.version, shell.content["text"]) == (2, "Shell: bash")
    assert [r["content"]["text"] for r in client.get(f"/v1/facts/{shell.id}/revisions").json()["data"]] == ["Shell: PowerShell", "Shell: bash"]
    gone = client.get("/v1/facts", {"q": "Tables for comparisons", "status": "deleted"}).json()["data"]
    assert [f["content"]["text"] for f in gone] == ["Tables for comparisons"]
    # The folder is what was imported, its own `updated` dates included.
    assert export_folder(client) == edited


@pytest.mark.django_db
def test_changes_made_through_the_api_show_and_move_updated(world, in_scope):
    client = world.client()
    import_folder(client, seed_folder())
    shell = Fact.objects.get(content__text="Shell: PowerShell")
    changed = dict(shell.content, text="Shell: fish")
    assert client.post(f"/v1/facts/{shell.id}/supersede", {"content": changed, "expectVersion": 1}, format="json").status_code == 200
    proxy = Fact.objects.get(content__text="Squid proxy runs on port 3128", content__file="infrastructure-notes.md")
    assert client.delete(f"/v1/facts/{proxy.id}").status_code == 204
    client.post("/v1/facts", {"type": "memory.user", "content": {"text": "Keyboard: split", "file": "user-preferences.md", "section": "Development Environment"}}, format="json")

    out = export_folder(client)
    prefs = out["user-preferences.md"]
    assert "- Shell: fish\n" in prefs and f"updated: {today()}" in prefs and "created: 2026-04-01" in prefs
    assert "- Package Manager: bun (NOT npm)\n- Keyboard: split\n\n## Communication Style" in prefs  # at the end of its section
    assert "Squid" not in out["infrastructure-notes.md"] and f"updated: {today()}" in out["infrastructure-notes.md"]
    assert out["tech-decisions.md"] == seed_folder()["tech-decisions.md"]  # untouched files keep their dates
    assert out["MEMORY.md"] == SEED_INDEX.replace(
        "→ user-preferences.md\n\n## Project", "→ user-preferences.md\n- [user] Keyboard: split → user-preferences.md\n\n## Project"
    )


@pytest.mark.django_db
def test_a_line_written_since_and_left_out_of_the_folder_is_kept(world):
    client = world.client()
    import_folder(client, seed_folder())
    client.post("/v1/facts", {"type": "memory.user", "content": "Prefers tabs"}, format="json")
    report = import_folder(client, {"user-preferences.md": seed_folder()["user-preferences.md"]})  # a stale copy
    assert (report["removed"], report["keptUnplaced"]) == (0, 1)
    assert "- Prefers tabs\n" in export_folder(client)["user-preferences.md"]


@pytest.mark.django_db
def test_an_export_reads_the_same_few_queries_however_big_the_folder(world):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = world.client()
    import_folder(client, seed_folder())

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            export_folder(client)
        return len(captured)

    small = queries()
    grown = dict(seed_folder())
    grown["user-preferences.md"] += "".join(f"- Preference {i}\n" for i in range(40))
    import_folder(client, grown)
    assert queries() == small  # one read of the folder's facts
    client.delete(f"/v1/facts/{client.get('/v1/facts', {'q': 'Preference 7'}).json()['data'][0]['id']}")
    assert queries() == small + 1  # and one more for when the lines that ended did (the file's `updated`)


# --- the type mapping -------------------------------------------------------------------------------


def test_the_four_types_map_onto_fact_types_and_back():
    assert [md.fact_type(kind) for kind in md.TYPES] == ["memory.user", "memory.project", "memory.feedback", "memory.reference"]
    assert [md.md_type(md.fact_type(kind)) for kind in md.TYPES] == list(md.TYPES)
    assert md.md_type("acme.note") is None and md.md_type(md.LAYOUT_TYPE) is None


@pytest.mark.django_db
@pytest.mark.parametrize("kind", md.TYPES)
def test_each_type_goes_out_and_comes_back_as_itself(world, in_scope, kind):
    client = world.client()
    client.post("/v1/facts", {"type": f"memory.{kind}", "content": f"a {kind} memory"}, format="json")
    client.post("/v1/facts", {"type": "acme.note", "content": "not a markdown memory"}, format="json")
    out = export_folder(client)
    topic = md.DEFAULT_TOPICS[kind]
    assert f"## {md.SECTIONS[kind]}\n- [{kind}] a {kind} memory → {topic}\n" in out["MEMORY.md"]
    assert out[topic].startswith(f"---\ntype: {kind}\n") and "not a markdown memory" not in "".join(out.values())

    import_folder(client, out, participant="end-7")
    kept = Fact.objects.filter(participant_id="end-7").exclude(type="memory.layout")
    assert {f.type for f in kept} == {f"memory.{kind}"}
    assert export_folder(client, participant="end-7") == out


# --- refusals, access -----------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "files, field, message",
    [
        ({"notes.md": "# Notes\n- no frontmatter\n"}, "files.notes.md", "frontmatter"),
        ({"notes.md": "---\ntype: diary\n---\n- x\n"}, "files.notes.md", "type"),
        ({"MEMORY.md": "## User\n- Prefers dark mode → user-preferences.md\n"}, "files.MEMORY.md", "line 2: an index entry is"),
        ({"MEMORY.md": "## User\n- [person] Sam → user-preferences.md\n"}, "files.MEMORY.md", "[type]"),
        ({"my notes.md": "---\ntype: user\n---\n- x\n"}, "files.my notes.md", "named like"),
        ({"notes.md": "---\ntype: user\n---\n- " + "x" * 17000 + "\n"}, "files.notes.md", "limit"),
    ],
)
def test_a_folder_an_import_would_refuse_changes_nothing(world, files, field, message):
    client = world.client()
    good = dict(seed_folder(), **files)
    problem = import_folder(client, good, status=400)
    assert problem["code"] == "validation-error"
    assert any(message in m for m in problem["errors"][field]), problem["errors"]
    assert client.get("/v1/facts").json()["data"] == []  # the good files were not written either


@pytest.mark.django_db
def test_markdown_memory_follows_the_participant_rule(world):
    owner = world.client()
    import_folder(owner, seed_folder())  # the project's own
    import_folder(owner, {"MEMORY.md": "## User\n- [user] end-7 likes tea\n"}, participant="end-7")
    reader = world.client(access="read")
    assert export_folder(reader) == seed_folder()  # a read key reads the project's memory
    refused = reader.get("/v1/markdown", {"participantId": "end-7"})
    assert refused.status_code == 403 and refused.json()["code"] == "participant-not-allowed"
    assert reader.post("/v1/markdown/import", {"files": [{"name": "MEMORY.md", "text": SEED_INDEX}]}, format="json").status_code == 403
    bound = world.client(participant="end-7", access="read")
    assert "end-7 likes tea" in bound.get("/v1/markdown/MEMORY.md").content.decode()  # a bound key's own, by default
    assert bound.get("/v1/markdown/MEMORY.md", {"participantId": "end-9"}).status_code == 403
    stranger = world.client(user=world.charlie, project=world.globex_main)
    assert "Squid" not in stranger.get("/v1/markdown/MEMORY.md").content.decode()


# --- lint -----------------------------------------------------------------------------------------------


def _big_index(entries: int, width: int = 60) -> dict[str, str]:
    lines = ["# Memory Index", "", "## User"]
    for i in range(entries):
        summary = f"Preference number {i:03d} " + "z" * max(0, width - 40)
        lines.append(md.index_line("user", summary, f"topic-{i % 4}.md"))
    files = {"MEMORY.md": "\n".join(lines) + "\n"}
    for t in range(4):
        files[f"topic-{t}.md"] = f"---\ntype: user\ncreated: 2026-0{t + 1}-01\nupdated: 2026-0{t + 1}-15\n---\n\n# Topic {t}\n\n- detail\n"
    return files


def test_lint_holds_the_200_line_limit_and_suggests_merging_and_archiving():
    fits = md.lint(_big_index(197))  # 3 header lines + 197 entries = 200
    assert fits["ok"] and fits["indexLines"] == 200
    over = md.lint(_big_index(198))
    assert not over["ok"] and over["indexLines"] == 201
    assert {"file": "MEMORY.md", "line": None, "code": "index-too-long",
            "message": "Memory index is getting large (201 lines). Review recommended."} in over["problems"]
    codes = [s["code"] for s in over["suggestions"]]
    assert "merge" in codes and "archive" in codes
    archive = [s for s in over["suggestions"] if s["code"] == "archive"]
    assert archive[0]["files"] == ["topic-0.md"]  # the oldest topic first (updated 2026-01-15)
    assert "archive/" in archive[0]["message"] and "nothing is deleted" in archive[0]["message"]


def test_lint_holds_the_150_character_entries():
    exact = md.index_line("user", "y" * (150 - len(md.index_line("user", "", "topic-0.md"))), "topic-0.md")
    assert len(exact) == 150
    files = _big_index(2)
    files["MEMORY.md"] += exact + "\n" + exact.replace("- [user] y", "- [user] yy") + "\n"
    report = md.lint(files)
    long = [p for p in report["problems"] if p["code"] == "entry-too-long"]
    assert [(p["line"], p["message"].split(" chara")[0]) for p in long] == [(7, "entry is 151")]


def test_lint_reports_what_an_import_would_refuse_and_near_duplicates():
    files = seed_folder()
    files["MEMORY.md"] += "- [user] Prefers dark mode, uses Windows 11 and PowerShell → user-preferences.md\n- [user] Gone → gone.md\n- nothing typed\n"
    files["loose.md"] = "# Loose\n- no frontmatter\n"
    report = md.lint(files)
    codes = {(p["file"], p["code"]) for p in report["problems"]}
    assert {("MEMORY.md", "missing-topic"), ("MEMORY.md", "entry-format"), ("loose.md", "no-frontmatter")} <= codes
    merges = [s for s in report["suggestions"] if s["code"] == "merge"]
    assert merges and merges[0]["lines"] == [4, 21]
    assert md.lint(seed_folder()) | {"suggestions": []} == md.lint(seed_folder())  # the seed's own folder is clean
    assert md.lint(seed_folder())["ok"]


# --- the CLI against a live server ---------------------------------------------------------------------------


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_markdown_export_import_and_lint_through_the_cli(live_server, tx_world, tmp_path):
    url, key = live_server.url, tx_world.key()
    source = tmp_path / "hand" / ".agents" / "memory"
    source.mkdir(parents=True)
    for name, text in seed_folder().items():
        (source / name).write_bytes(text.encode())
    (source / "archive").mkdir()
    (source / "archive" / "old.md").write_text("not read: archived\n")

    report = ok(cli(url, key, "markdown", "import", "--dir", str(source), "--participant", "end-7"))
    assert report["created"] == 29 and [f["name"] for f in report["files"]][0] == "MEMORY.md"
    assert ok(cli(url, key, "markdown", "import", "--dir", str(source), "--participant", "end-7"))["unchanged"] == 29

    out = tmp_path / "out"
    exported = ok(cli(url, key, "markdown", "export", "--dir", str(out), "--participant", "end-7"))
    assert exported["files"][0] == "MEMORY.md"
    assert {name: (out / name).read_bytes() for name in exported["files"]} == {n: t.encode() for n, t in seed_folder().items()}
    assert ok(cli(url, key, "markdown", "export", "--dir", str(tmp_path / "project")))["files"] == ["MEMORY.md"]  # the project's own: empty

    from memoryhub.client import MemoryHub

    with MemoryHub(url=url, api_key=key) as hub:
        assert hub.markdown_file("MEMORY.md", participant_id="end-7") == SEED_INDEX

    lint = cli(None, None, "markdown", "lint", "--dir", str(source))  # no server, no key needed
    assert lint.returncode == 0 and ok(lint)["ok"]
    (source / "MEMORY.md").write_text(SEED_INDEX + "".join(f"- [user] entry {i}\n" for i in range(190)), encoding="utf-8")
    before = _digest(source)
    too_long = cli(None, None, "markdown", "lint", "--dir", str(source))
    assert too_long.returncode == 1
    assert "Memory index is getting large (210 lines). Review recommended." in too_long.stdout
    assert _digest(source) == before  # lint never changes, moves or deletes anything

    assert "not a folder" in failed(cli(url, key, "markdown", "import", "--dir", str(tmp_path / "missing")), 2)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "notes.md").write_text("# Notes\n- no frontmatter\n")
    err = failed(cli(url, key, "markdown", "import", "--dir", str(broken)), 1)
    assert "validation-error (400)" in err and "files.notes.md: line 1:" in err


def test_parse_and_render_are_inverse_on_the_seed_files():
    for name, text in seed_folder().items():
        parsed = md.parse(name, text)
        assert not parsed.errors and not parsed.warnings
        assert md.render(parsed.frontmatter, parsed.template, [md.item_role(parsed, i).line() for i in parsed.items]) == text
