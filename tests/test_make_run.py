"""`make run` as a new user runs it: serves on the embedded database, keeps its data,
lets manage.py reach the same database meanwhile, and stops it all on Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(data_dir: Path, port: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "MEMORYHUB_EMBEDDED_CLEANUP", "DJANGO_SETTINGS_MODULE"}}
    return env | {"MEMORYHUB_DATA_DIR": str(data_dir), "PORT": str(port)}


def _postgres_running(data_dir: Path) -> bool:
    for proc in psutil.process_iter(["name", "cmdline"]):
        try:
            if proc.info["name"] == "postgres" and str(data_dir) in " ".join(proc.info["cmdline"] or []):
                return True
        except psutil.Error:
            continue
    return False


def _start(env: dict) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "run"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )
    key, output, deadline = None, [], time.monotonic() + 240
    while key is None and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        output.append(line)
        if match := re.search(r"Write key:\s+(\S+)", line):
            key = match.group(1)
    assert key, "make run printed no write key:\n" + "".join(output)
    base = f"http://127.0.0.1:{env['PORT']}"
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/readyz", timeout=2).status_code == 200:
                return proc, key
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("make run never became ready")


def _ctrl_c(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise


@pytest.mark.slow
def test_make_run_serves_keeps_data_and_stops_cleanly(tmp_path):
    data_dir = tmp_path / "data"
    env = _env(data_dir, _free_port())
    base = f"http://127.0.0.1:{env['PORT']}"
    proc, key = _start(env)
    try:
        auth = {"Authorization": f"Bearer {key}"}
        assert httpx.get(base + "/v1/me", headers=auth).json()["tenant"] == "demo"
        assert httpx.get(base + "/v1/docs").status_code == 200
        written = httpx.post(base + "/v1/facts", headers=auth, json={"type": "demo.note", "content": "kept across restarts"})
        assert written.status_code == 201, written.text
        # manage.py from the same checkout reaches the same database while make run serves ...
        created = subprocess.run(
            [str(ROOT / ".venv/bin/python"), "manage.py", "apikey", "create", "--user", "demo", "--project", "demo/demo", "--access", "read"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
        )
        assert created.returncode == 0, created.stderr
        read_key = json.loads(created.stdout)["apiKey"]
        # ... and leaves it running when it exits.
        assert httpx.get(base + "/v1/me", headers={"Authorization": f"Bearer {read_key}"}).json()["access"] == "read"
    finally:
        _ctrl_c(proc)
    assert not _postgres_running(data_dir), "Ctrl-C left the embedded PostgreSQL running"

    # A second make run finds yesterday's data, and the same demo key.
    proc, second_key = _start(env)
    try:
        assert second_key == key
        listed = httpx.get(base + "/v1/facts", headers={"Authorization": f"Bearer {key}"}).json()["data"]
        assert [f["content"] for f in listed] == ["kept across restarts"]
    finally:
        _ctrl_c(proc)
    assert not _postgres_running(data_dir)


@pytest.mark.slow
def test_after_a_kill_9_the_next_make_run_adopts_the_database_and_its_ctrl_c_stops_it(tmp_path):
    data_dir = tmp_path / "data"
    env = _env(data_dir, _free_port())
    proc, key = _start(env)
    server = next(p for p in psutil.Process(proc.pid).children(recursive=True) if "serve" in " ".join(p.cmdline()))
    server.kill()  # SIGKILL to the web server alone: it cannot let go of the database
    proc.wait(timeout=30)
    assert _postgres_running(data_dir), "the database is orphaned, as it would be after a crash"
    holders = json.loads((data_dir / "postgres" / ".handle_pids.json").read_text())
    assert server.pid in holders  # the dead server still seems to hold it

    proc, second_key = _start(env)  # adopts the orphaned server
    try:
        assert second_key == key
        assert httpx.get(f"http://127.0.0.1:{env['PORT']}/v1/me", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    finally:
        _ctrl_c(proc)
    assert not _postgres_running(data_dir), "a clean stop after a kill -9 left the embedded PostgreSQL running"


@pytest.mark.slow
@pytest.mark.redis
def test_database_url_and_redis_url_switch_to_real_servers(redis_url, django_db_blocker, tmp_path):
    """The same code on a PostgreSQL named by DATABASE_URL (here: a database of its own on
    the test server) and Redis by REDIS_URL: migrate, bootstrap, serve, ready."""
    from django.db import connection

    from tests.database_url import database_url

    with django_db_blocker.unblock():
        with connection.cursor() as cursor:
            cursor.execute("DROP DATABASE IF EXISTS memoryhub_url_test")
            cursor.execute("CREATE DATABASE memoryhub_url_test")
    url = database_url("memoryhub_url_test")
    port = _free_port()
    env = _env(tmp_path / "unused", port) | {"DATABASE_URL": url, "REDIS_URL": redis_url}
    python = str(ROOT / ".venv/bin/python")
    boot = subprocess.run([python, "manage.py", "migrate"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert boot.returncode == 0, boot.stderr
    boot = subprocess.run(
        [python, "manage.py", "bootstrap", "--tenant", "t", "--project", "p", "--user", "u"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert boot.returncode == 0, boot.stderr
    key = json.loads(boot.stdout)["apiKey"]
    server = subprocess.Popen(
        [python, "manage.py", "serve"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline, ready = time.monotonic() + 120, None
        while time.monotonic() < deadline:
            try:
                ready = httpx.get(base + "/readyz", timeout=2)
                if ready.status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        assert ready is not None and ready.json()["checks"] == {"database": "ok", "broker": "ok"}
        assert httpx.get(base + "/v1/me", headers={"Authorization": f"Bearer {key}"}).json()["tenant"] == "t"
    finally:
        os.killpg(server.pid, signal.SIGINT)
        server.wait(timeout=30)
    assert not (tmp_path / "unused" / "postgres").exists()  # no embedded database was started


def _serve(env: dict) -> subprocess.CompletedProcess:
    """`manage.py serve` as `make run` runs it, to its end."""
    return subprocess.run([sys.executable, "manage.py", "serve"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_serve_checks_the_port_before_the_banner(tmp_path):
    """A second `make run` (the port taken) or a PORT that is no port: one line that says what to do,
    no banner with URLs and a key for a server that never starts, no traceback."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        taken = _serve(_env(tmp_path / "data", port))
    assert taken.returncode != 0
    assert "Write key" not in taken.stdout and "Traceback" not in taken.stderr and "_pool" not in taken.stderr
    assert taken.stderr.strip() == (f"CommandError: Port {port} on 127.0.0.1 is already in use (another `make run`?): "
                                    f"stop that one, or serve elsewhere with `PORT={port + 1} make run`.")
    assert not _postgres_running(tmp_path / "data")  # it stopped before starting anything

    bad = _serve(_env(tmp_path / "data", "abc"))  # type: ignore[arg-type]
    assert bad.returncode != 0 and "Write key" not in bad.stdout
    assert bad.stderr.strip() == "CommandError: PORT must be a number from 1 to 65535, not 'abc': try `PORT=9000 make run`."
