"""Dropping persistent database connections that died while idle, without a round trip.

Django's CONN_HEALTH_CHECKS sends `SELECT 1` before each request's first query, about a
millisecond per API request here. An idle PostgreSQL connection has nothing to read: when
its socket is readable between requests, the server has closed it (a restart, an
administrator's pg_terminate_backend, an idle timeout) or sent something unexpected. At
the start of each request such a connection is closed, and the request's first query
opens a fresh one, so a database restart costs no failed request and a healthy connection
costs one `poll()` call.
"""

from __future__ import annotations

import select

from django.conf import settings
from django.db import connection as default_connection, connections
from django.db.backends.postgresql.base import ServerBindingCursor


def drop_dead_connections(**kwargs) -> None:
    """request_started receiver: close each open connection whose socket has data or EOF waiting."""
    for connection in connections.all(initialized_only=True):
        raw = connection.connection
        if raw is None or connection.in_atomic_block:
            continue
        try:
            poller = select.poll()  # not select(): it fails on descriptors above 1023
            poller.register(raw.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
            readable = bool(poller.poll(0))
        except Exception:  # psycopg raises for a connection it already knows is closed
            readable = True
        if readable:
            connection.close()


def cursor(*, prepared: bool = True):
    """A cursor on Django's connection (its query logging and error wrapping included).
    `prepared`: one that binds parameters on the server, so psycopg prepares the statement
    once per connection (DATABASES OPTIONS `prepare_threshold`, set when
    MEMORYHUB_PREPARED_BELOW > 0); Django's own cursors bind on the client and never prepare."""
    if not prepared or settings.MEMORYHUB_PREPARED_BELOW <= 0:
        return default_connection.cursor()
    default_connection.ensure_connection()
    raw = ServerBindingCursor(default_connection.connection)
    if default_connection.queries_logged:
        return default_connection.make_debug_cursor(raw)
    return default_connection.make_cursor(raw)
