"""Start-up checks: memoryhub needs PostgreSQL ≥ 16 with the pgvector extension.

Registered as a database system check, which `migrate` runs before touching the
schema, and called by `wsgi.py`, so a server without pgvector stops at start with one
clear sentence naming the fix, never a stack trace.
"""

from __future__ import annotations

from django.core import checks
from django.db import connections
from django.db.utils import OperationalError

FIX = (
    "Install pgvector on that server (Debian/Ubuntu: apt install postgresql-<version>-pgvector; "
    "Docker: the pgvector/pgvector image) and run CREATE EXTENSION vector as a superuser, "
    "or unset DATABASE_URL to use the embedded database, which ships with pgvector."
)


def database_problem(alias: str = "default") -> str | None:
    """One sentence saying what is wrong with the database, or None when it will do."""
    connection = connections[alias]
    try:
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version_num")
            version = int(cursor.fetchone()[0])
            cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
            has_vector = cursor.fetchone() is not None
    except OperationalError as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
        return f"memoryhub cannot reach its database ({first_line}). Check DATABASE_URL."
    if version < 160000:
        return f"memoryhub needs PostgreSQL 16 or newer with pgvector; this server is {version // 10000}. {FIX}"
    if not has_vector:
        return f"The PostgreSQL server at DATABASE_URL has no pgvector extension, which memoryhub needs. {FIX}"
    return None


@checks.register(checks.Tags.database)
def check_pgvector(app_configs=None, databases=None, **kwargs):
    if not databases:
        return []
    problem = database_problem()
    if problem is None:
        return []
    return [checks.Error(problem, id="memoryhub.E001")]
