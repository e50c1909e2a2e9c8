"""pytest plugin (`-p tests.no_secrets_logged`): no API key is ever logged.

At session start a handler on the root logger writes every record of the run (the app's,
Django's, the live servers' threads', Celery's in-process tasks') to a file, and every
API key secret the run makes or presents is noted (accounts.services._hash_secret sees
each one). At the end the file is searched for every secret and every whole key: one
found fails the session and names the log line. MEMORYHUB_LOG_CAPTURE keeps the file.
"""

from __future__ import annotations

import logging
import os
import tempfile

import pytest

SECRETS: set[str] = set()
_state: dict = {}


def pytest_sessionstart(session):
    path = os.environ.get("MEMORYHUB_LOG_CAPTURE") or tempfile.mkstemp(prefix="memoryhub-test-log-", suffix=".log")[1]
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.getLogger().addHandler(handler)
    _state.update(path=path, handler=handler)

    from accounts import services

    original = services._hash_secret

    def noting(secret: str) -> str:
        if isinstance(secret, str) and len(secret) >= 20:  # generated secrets are 43 characters
            SECRETS.add(secret)
        return original(secret)

    services._hash_secret = noting


def pytest_runtest_setup(item):
    # Django's logging setup (dictConfig, when pytest-django sets Django up) replaces the
    # root logger's handlers: put ours back before every test.
    handler = _state.get("handler")
    if handler is not None and handler not in logging.getLogger().handlers:
        logging.getLogger().addHandler(handler)


def scan(path: str) -> list[tuple[int, str]]:
    found = []
    with open(path, encoding="utf-8", errors="replace") as log:
        for number, line in enumerate(log, 1):
            if "_" in line and any(secret in line for secret in SECRETS):
                found.append((number, line.strip()[:300]))
    return found


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    handler = _state.get("handler")
    if handler is None:
        return
    logging.getLogger().removeHandler(handler)
    handler.close()
    found = scan(_state["path"])
    _state["found"] = found
    with open(_state["path"], encoding="utf-8", errors="replace") as log:
        _state["lines"] = sum(1 for _ in log)
    if found and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if not os.environ.get("MEMORYHUB_LOG_CAPTURE") and not found:
        os.unlink(_state["path"])


def pytest_terminal_summary(terminalreporter):
    if "found" not in _state:
        return
    found = _state["found"]
    terminalreporter.write_line(
        f"no secret logged: {len(SECRETS)} API key secrets made or presented, {_state['lines']} log lines searched, "
        f"{len(found)} found" + (f" (log kept at {_state['path']})" if found else "")
    )
    for number, line in found[:10]:
        terminalreporter.write_line(f"  SECRET LOGGED at line {number}: {line}", red=True)
