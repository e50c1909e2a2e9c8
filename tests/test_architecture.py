"""The house's arrows hold (docs/architecture.md): the import-linter contracts of pyproject.toml.

- layers: memoryhub (the composition root) > dashboard > privacy > agent > profiles >
  approvals | retrieval | workspaces > facts > accounts > core; each imports only what is
  below it, and nothing imports memoryhub.
- the client, CLI, MCP stdio server and framework adapters never import Django or the apps.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_import_contracts_are_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout, result.stdout


def test_a_broken_arrow_is_caught(tmp_path):
    """The contract is not vacuous: a module of facts that imports agent breaks it."""
    probe = ROOT / "facts" / "_architecture_probe.py"
    probe.write_text("import agent.services  # noqa: F401\n")
    try:
        lint = Path(sys.executable).with_name("lint-imports")
        result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    finally:
        probe.unlink()
    assert result.returncode != 0
    assert "facts._architecture_probe -> agent.services" in result.stdout, result.stdout
