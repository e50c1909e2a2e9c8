"""docs/ walked through literally, as tests/test_readme.py walks the README.

Every shell block of docs/*.md is accounted for here:
- WALKED: run here, as written, against a live server or the test database. Only what a
  reader fills in is filled in: their URL and key, `[optional parts]` left out, their own
  memory.json.
- WALKED_ELSEWHERE: run literally by another test, which is named.
- NOT_HERE: not run on this machine, with the reason. Its commands are still checked: every
  script and file named exists, and every flag is one the command's --help lists.

A block that is in none of the three fails the suite. So does a block whose command no
longer runs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.database_url import database_url
from tests.test_readme import runnable

ROOT = Path(__file__).resolve().parent.parent

WALKED = {
    ("operations.md", 0): "legal hold from a shell",
    ("operations.md", 1): "participant export and erase",
    ("profiles-and-markdown.md", 0): "memory.json in and out",
    ("profiles-and-markdown.md", 1): "MEMORY.md folder out, in, lint",
}
WALKED_ELSEWHERE = {
    ("agent-loop.md", 0): "tests/test_agent_loop.py runs docs/examples/agent_loop.py with these flags against a fake chat server",
}
NOT_HERE = {
    ("deploy.md", 0): "needs a Docker daemon (none on this machine or in CI)",
    ("deploy.md", 1): "needs a Docker daemon (none on this machine or in CI)",
    ("deploy.md", 2): "needs a Docker daemon (none on this machine or in CI)",
    ("benchmarks.md", 0): "a benchmark: minutes, prints figures (docs/benchmarks.md)",
    ("benchmarks.md", 1): "a benchmark: minutes to an hour",
    ("benchmarks.md", 2): "a benchmark: 7 to 60 minutes",
    ("benchmarks.md", 3): "a load test: 5 minutes",
    ("benchmarks.md", 4): "the gate's benchmark: minutes with --compare",
    ("reliability.md", 0): "make reliability: the long runs (CI runs the same tests at fewer examples)",
}


def doc_blocks() -> dict[tuple[str, int], str]:
    found = {}
    for doc in sorted((ROOT / "docs").glob("*.md")):
        for index, block in enumerate(re.findall(r"```(?:sh|bash)\n(.*?)```", doc.read_text(), re.S)):
            found[(doc.name, index)] = block
    return found


def test_every_shell_block_of_docs_is_walked_or_says_why_not():
    blocks = set(doc_blocks())
    accounted = set(WALKED) | set(WALKED_ELSEWHERE) | set(NOT_HERE)
    assert blocks - accounted == set(), "a new shell block in docs/: walk it here, or say in NOT_HERE why it cannot run"
    assert accounted - blocks == set(), "a block listed here is gone from docs/"


def _commands(block: str) -> list[list[str]]:
    """The block's commands as words: continuation lines joined, comments and `[…]` dropped."""
    joined = re.sub(r"\\\n\s*", " ", block)
    commands = []
    for line in joined.splitlines():
        line = re.sub(r"\s+#.*$", "", re.sub(r"\s+\[[^\]]*\]", "", line)).strip()
        if line and not line.startswith("#"):
            commands.append(shlex.split(line.replace("$(mktemp -d)", "/tmp/x").replace("mh_…", "mh_x")))
    return commands


def _help(argv: list[str]) -> str:
    done = subprocess.run([sys.executable, *argv, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=os.environ | {"PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_commands_not_run_here_still_name_real_scripts_and_flags():
    blocks = doc_blocks()
    checked = 0
    for key in NOT_HERE:
        for words in _commands(blocks[key]):
            words = [w for w in words if "=" not in w or w.startswith("-")]  # VAR=value prefixes
            if words[0] in (".venv/bin/python", "python", "python3") and words[1].endswith(".py"):
                script = words[1]
                assert (ROOT / script).exists(), f"{key}: {script} does not exist"
                flags = {w.split("=")[0] for w in words[2:] if w.startswith("--")}
                if flags:
                    shown = _help([script])
                    assert all(flag in shown for flag in flags), f"{key}: {sorted(flags)} not all in {script} --help"
                checked += 1
            elif words[:2] == ["docker", "compose"] or words[:2] == ["docker", "build"]:
                for word in words:
                    if word.startswith("docker/"):
                        assert (ROOT / word).exists(), f"{key}: {word} does not exist"
                if "manage.py" in words:
                    at = words.index("manage.py")
                    shown = _help(["manage.py", words[at + 1]])
                    assert all(w.split("=")[0] in shown for w in words[at + 2:] if w.startswith("--"))
                checked += 1
            elif words[0] == "make":
                assert re.search(rf"^{words[1]}:", (ROOT / "Makefile").read_text(), re.M), f"{key}: no make {words[1]}"
                checked += 1
    assert checked >= 12


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYHUB_")}
    return env | {"PYTHONPATH": str(ROOT), **extra}


def _run(script: str, cwd: Path, env: dict) -> str:
    done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{script}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.django_db(transaction=True)
def test_the_operations_commands_run_as_written(tx_world, tmp_path):
    from tests.dashboard_data import write

    write(tx_world.alice, tx_world.desk, "end-7 prefers phone calls.", participant_id="end-7")
    blocks = doc_blocks()
    script = "python() { \"$PY\" \"$ROOT/manage.py\" \"${@:2}\"; }\n"  # `python manage.py …` from the checkout
    script += blocks[("operations.md", 0)] + "\n" + runnable(blocks[("operations.md", 1)]).replace(" # or --tenant acme", "")
    out = _run(script, tmp_path, _env(DATABASE_URL=database_url(), PY=sys.executable, ROOT=str(ROOT), SECRET_KEY="docs-walk"))
    lines = out.splitlines()
    assert "1" in [line.strip() for line in lines]  # the legal hold took the one fact
    exported = json.loads((tmp_path / "end-7.json").read_text())
    print(sorted(exported), out[-600:])


def test_the_profile_and_markdown_commands_run_as_written(live_server, tx_world, tmp_path):
    blocks = doc_blocks()
    (tmp_path / "memory.json").write_text(json.dumps({"name": "Sam", "favourite_colour": "green"}))
    script = "memoryhub() { \"$PY\" -m memoryhub.cli \"$@\"; }\n"
    script += "\n".join(runnable(blocks[("profiles-and-markdown.md", i)]) for i in (0, 1))
    out = _run(script, tmp_path, _env(MEMORYHUB_URL=live_server.url, MEMORYHUB_API_KEY=tx_world.key(), PY=sys.executable))
    assert '"name": "Sam"' in out
    assert (tmp_path / ".agents/memory/MEMORY.md").exists()
    assert '"ok": true' in out
