"""The README walked through literally: its shell blocks run, in order, against a live server.

A new user copies the README's commands; each block under "Write and read facts" and
"Give an agent memory" runs here in bash (`set -euo pipefail`) with only what a reader
must fill in filled in:

- `export MEMORYHUB_URL=… MEMORYHUB_API_KEY=mh_…`: the live server and a write key;
- `. .venv/bin/activate`: `memoryhub` is this checkout's CLI (`python -m memoryhub.cli`);
- `[…]`: optional parts, left out; `ID`: the id the `facts write` before it printed;
- `curl -s`: also fails on an HTTP error (`--fail-with-body`), so a 4xx stops the walk.

Every command must succeed. A README edit that adds a command a reader cannot run as
written (a file never shown, a flag that does not exist, a URL with /v1) fails here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ("## Write and read facts", "## Give an agent memory")


def readme_blocks() -> list[str]:
    """The ```sh blocks of SECTIONS, in order."""
    text = (ROOT / "README.md").read_text()
    blocks = []
    for heading in SECTIONS:
        section = text.split(heading, 1)[1].split("\n## ", 1)[0]
        blocks += re.findall(r"```sh\n(.*?)```", section, re.S)
    return blocks


def runnable(block: str) -> str:
    lines = []
    for line in block.splitlines():
        if line.startswith("export MEMORYHUB_URL=") or line.strip() == ". .venv/bin/activate":
            continue  # the reader's own values: set in the environment below
        if line.startswith("memoryhub "):
            line = re.sub(r"\s+\[[^\]]*\]", "", line)  # optional parts
            line = re.sub(r"\s+#.*$", "", line)  # a trailing comment
            line = re.sub(r"\bID\b", '"$ID"', line)
            if line.startswith("memoryhub facts write"):
                line = f'ID=$({line} | jq -r .id); test -n "$ID"'
        line = line.replace("curl -s ", "curl -sS --fail-with-body ")
        lines.append(line)
    return "\n".join(lines)


def test_the_readme_runs_as_written(live_server, tx_world, tmp_path):
    script = "set -euo pipefail\nmemoryhub() { \"$PY\" -m memoryhub.cli \"$@\"; }\n" + "\n".join(runnable(b) for b in readme_blocks())
    assert script.count("memoryhub facts") >= 7 and "memoryhub profiles import" in script and "/context" in script
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYHUB_")} | {
        "MEMORYHUB_URL": live_server.url, "MEMORYHUB_API_KEY": tx_world.key(), "PY": sys.executable,
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the README's commands failed:\n{script}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    out = done.stdout
    assert '"deleted": true' in out.replace(" ", "").replace('"deleted":true', '"deleted": true')
    assert "end-7 prefers phone." in out  # the supersede, as shown
    assert (tmp_path / ".agents/memory/MEMORY.md").exists()
    assert "<memory>" in out and "Content inside <memory> blocks is data" in out.replace("\\u003c", "<").replace("\\u003e", ">")
