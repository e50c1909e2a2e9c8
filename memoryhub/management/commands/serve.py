"""`manage.py serve`: what `make run` does after installing.

Checks the database, migrates, makes the demo tenant/project/user when none exists,
prints where to go and how to sign in, then serves on 127.0.0.1:$PORT (8000). Ctrl-C
(or SIGTERM) stops the web server within seconds, an embedding in flight included (what
it did not embed, the backfill job does later), and, for the embedded database, the
database too. Slow or stalled clients are dropped after a few seconds (PooledWSGIServer).
Without a broker (no REDIS_URL) the beat schedule's jobs run on a background thread
(memoryhub.beat), so the embedded service expires, purges and backfills as production does.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import logging
import os
import queue
import secrets
import signal
import socket
import threading
import time
from concurrent.futures import Future

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.core.management.commands.runserver import Command as RunserverCommand
from django.core.servers.basehttp import ServerHandler, WSGIRequestHandler, WSGIServer

from accounts.models import Access, ApiKey, Project, Tenant
from accounts.services import apikey_create, tenant_bootstrap
from core import tasks
from memoryhub import beat, embedded
from memoryhub.checks import database_problem
from retrieval.embeddings import interrupt_documents

DEMO_TENANT, DEMO_PROJECT, DEMO_USER = "demo", "demo", "demo"

logger = logging.getLogger(__name__)


def address_problem(host: str, port: str) -> str | None:
    """Why serving on host:port cannot start (a bad PORT, an address in use), in one line; None if it can."""
    if not str(port).isdigit() or not 1 <= int(port) <= 65535:
        return f"PORT must be a number from 1 to 65535, not {port!r}: try `PORT=9000 make run`."
    try:
        infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except socket.gaierror:
        return f"HOST {host!r} is not an address this machine has: leave HOST unset (127.0.0.1) or give an IP address."
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: TIME_WAIT is no conflict
        try:
            probe.bind(address)
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                return (f"Port {port} on {host} is already in use (another `make run`?): stop that one, "
                        f"or serve elsewhere with `PORT={int(port) + 1} make run`.")
            return f"Cannot serve on {host}:{port} ({error.strerror}): choose another HOST or PORT."
    return None


class Command(BaseCommand):
    help = "Migrate, ensure the demo tenant, print how to sign in, and serve."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", default=os.environ.get("PORT", "8000"))
        parser.add_argument("--no-serve", action="store_true", help="prepare and print, but do not serve")

    def handle(self, *args, **options):
        if not options["no_serve"] and (problem := address_problem(options["host"], options["port"])):
            raise CommandError(problem)  # before the banner: URLs and a key for a server that never starts mislead
        if problem := database_problem():
            raise CommandError(problem)
        call_command("migrate", interactive=False, verbosity=0)
        demo = self._demo_credentials()
        base = f"http://{options['host']}:{options['port']}"
        self.stdout.write(
            "\n".join(
                [
                    "",
                    "memoryhub is starting.",
                    f"  Dashboard:   {base}/dashboard/  (user {demo['username']!r}, password {demo['password']!r})",
                    f"  Admin:       {base}/admin/  (the same login; for operators, across tenants)",
                    f"  API docs:    {base}/v1/docs",
                    f"  Write key:   {demo['apiKey']}",
                    f"  Try:         curl -H 'Authorization: Bearer {demo['apiKey']}' {base}/v1/me",
                    "  Stop with Ctrl-C.",
                    "",
                ]
            )
        )
        if options["no_serve"]:
            return
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, _raise_keyboard_interrupt)
        runserver = RunserverCommand(stdout=self.stdout, stderr=self.stderr)
        runserver.server_cls = PooledWSGIServer
        in_process_beat = beat.InProcessBeat().start() if settings.CELERY_TASK_ALWAYS_EAGER else None
        try:
            call_command(
                runserver, f"{options['host']}:{options['port']}", use_reloader=False, use_threading=False, skip_checks=True
            )
        except KeyboardInterrupt:
            pass
        finally:
            interrupt_documents()  # an embedding in flight stops at its next chunk; backfill does the rest later
            if in_process_beat is not None:
                in_process_beat.stop(timeout=10)
            tasks.shutdown()
            self.stdout.write("memoryhub stopped.")
            embedded.stop()

    def _demo_credentials(self) -> dict:
        """The demo login and write key: made once, kept in the data folder, re-made if stale."""
        path = embedded.data_dir() / "demo.json"
        saved = json.loads(path.read_text()) if path.exists() else {}
        User = get_user_model()
        key_ok = saved.get("apiKeyId") and ApiKey.objects.filter(id=saved["apiKeyId"], revoked_at__isnull=True).exists()
        user = User.objects.filter(username=saved.get("username", DEMO_USER)).first()
        if key_ok and user is not None and user.check_password(saved.get("password", "")):
            return saved
        password = secrets.token_urlsafe(12)
        if not Tenant.objects.exists():
            result = tenant_bootstrap(tenant=DEMO_TENANT, project=DEMO_PROJECT, username=DEMO_USER, password=password)
            raw = result["apiKey"]
            key_id = ApiKey.objects.get(prefix=raw.split("_")[1]).id
        else:
            project = Project.objects.select_related("tenant").filter(tenant__slug=DEMO_TENANT, slug=DEMO_PROJECT).first()
            if project is None:
                result = tenant_bootstrap(tenant=DEMO_TENANT, project=DEMO_PROJECT, username=DEMO_USER, password=password)
                project = Project.objects.select_related("tenant").get(id=result["projectId"])
            user, _ = User.objects.get_or_create(username=DEMO_USER)
            user.set_password(password)
            user.save()
            key, raw = apikey_create(user=user, tenant=project.tenant, project=project, access=Access.WRITE, name="demo")
            key_id = key.id
        user = User.objects.get(username=DEMO_USER)
        user.is_staff = user.is_superuser = True  # the local demo user runs the admin
        user.save(update_fields=["is_staff", "is_superuser"])
        saved = {"username": DEMO_USER, "password": password, "apiKey": raw, "apiKeyId": str(key_id)}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(saved))
        path.chmod(0o600)
        return saved


class _DeadlineReader(io.RawIOBase):
    """A connection's reads, each allowed `idle` seconds and all of a request's together
    `deadline` (set per request): a client that announces a body and sends two bytes, or
    one that drips a byte at a time, gets a TimeoutError instead of a thread forever. The
    socket's own timeout (for writing the answer) is put back after each read."""

    def __init__(self, sock: socket.socket, *, idle: float, write_timeout: float):
        self._sock = sock
        self._idle = idle
        self._write_timeout = write_timeout
        self.deadline = time.monotonic() + idle
        self.received = 0  # bytes of the current request so far

    def start_request(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.received = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the request took too long to arrive")
        self._sock.settimeout(min(self._idle, remaining))
        try:
            count = self._sock.recv_into(buffer)
            self.received += count
            return count
        finally:
            self._sock.settimeout(self._write_timeout)


class _RequestHandler(WSGIRequestHandler):
    """Django's handler, reading the whole request (line, headers, body) on the connection's
    own thread under the server's read timeouts, then running the application on a pooled
    thread: a slow client holds a cheap connection thread for seconds, never a pooled one."""

    def setup(self):
        self.timeout = self.server.write_timeout  # StreamRequestHandler sets it on the socket
        super().setup()
        self._reader = _DeadlineReader(self.connection, idle=self.server.idle_timeout, write_timeout=self.server.write_timeout)
        self.rfile = io.BufferedReader(self._reader)

    def handle_one_request(self):
        self._reader.start_request(self.server.read_timeout)
        try:
            self.raw_requestline = self.rfile.readline(65537)
            if not self.raw_requestline:  # the client closed the connection
                self.close_connection = True
                return
            if len(self.raw_requestline) > 65536:
                self.requestline = self.request_version = self.command = ""
                self.send_error(414)
                return
            if not self.parse_request():  # an error was answered
                return
            body = self._body()
        except TimeoutError:
            self.close_connection = True
            if self._reader.received:  # a connection that never sent a byte is closed quietly
                logger.info("dropped %s: its request did not arrive in time", self.client_address[0])
                with contextlib.suppress(OSError):
                    self.wfile.write(b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
            return
        handler = ServerHandler(body, self.wfile, self.get_stderr(), self.get_environ())
        handler.request_handler = self  # backpointer for logging & connection closing
        self.server.run_pooled(handler.run, self.server.get_app())

    def _body(self):
        """The body, read in full (a stream over it), or the connection itself when it
        announces more than the API accepts (Django refuses it without reading it)."""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        if length <= 0:
            return io.BytesIO()
        if length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            return self.rfile
        body = self.rfile.read(length)
        if len(body) < length:  # the client closed before the end
            self.close_connection = True
        return io.BytesIO(body)


class PooledWSGIServer(WSGIServer):
    """Django's development server, running the application on a fixed pool of threads.

    - A thread per request (runserver's way) opens a new database connection for every
      request, which cost more than the retrieval itself; pooled threads keep theirs
      (CONN_MAX_AGE).
    - A connection is read on a thread of its own (at most `max_connections` at once; more
      are closed at once), under read timeouts: no byte for `idle_timeout` seconds, or
      the request not in after `read_timeout`, and it is dropped (408). Only a request
      that has fully arrived takes a pooled thread, so slow or stalled clients never
      starve the pool: /healthz answers beside them.
    - Every thread is a daemon, so Ctrl-C/SIGTERM ends the process even with a request
      in flight.
    - TCP_NODELAY on each connection: the server writes headers and body separately, and
      with Nagle's algorithm and delayed ACKs every kept-alive request waited ~40 ms.
    """

    daemon_threads = True
    pool_size = 8
    max_connections = 256
    idle_timeout = 5.0
    read_timeout = 30.0
    write_timeout = 30.0

    def __init__(self, server_address, handler_class=None, **kwargs):
        super().__init__(server_address, _RequestHandler, **kwargs)
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._connections = threading.BoundedSemaphore(self.max_connections)
        for number in range(self.pool_size):
            threading.Thread(target=self._work, name=f"memoryhub-web-{number}", daemon=True).start()

    def get_request(self):
        conn, addr = super().get_request()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, addr

    def process_request(self, request, client_address):
        if not self._connections.acquire(blocking=False):
            logger.warning("%d connections open: closing the one from %s", self.max_connections, client_address[0])
            self.shutdown_request(request)
            return
        threading.Thread(target=self._connection, args=(request, client_address), daemon=True).start()

    def _connection(self, request, client_address):
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            self._connections.release()

    def run_pooled(self, function, *args):
        """`function(*args)` on a pooled thread; waits for it (its exception is raised here)."""
        future: Future = Future()
        self._jobs.put((future, function, args))
        return future.result()

    def _work(self):
        while (job := self._jobs.get()) is not None:
            future, function, args = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(function(*args))
            except BaseException as exc:
                future.set_exception(exc)

    def server_close(self):
        super().server_close()
        for _ in range(self.pool_size):
            self._jobs.put(None)


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt
