"""The test database server as a DATABASE_URL, for the subprocesses tests start."""

from __future__ import annotations

from urllib.parse import quote

from django.db import connection


def database_url(name: str | None = None) -> str:
    """postgres:// URL of the test database (or of database `name` on the same server); a
    socket folder as host is percent-encoded, as dj-database-url reads it."""
    db = connection.settings_dict
    host = db["HOST"] or "127.0.0.1"
    host_part = quote(host, safe="") if host.startswith("/") else host
    password = f":{quote(db['PASSWORD'], safe='')}" if db.get("PASSWORD") else ""
    return f"postgres://{quote(db['USER'], safe='')}{password}@{host_part}:{db['PORT'] or 5432}/{name or db['NAME']}"
