"""`manage.py serve`: what `make run` does after installing.

Checks the database, migrates, makes the demo tenant/project/user when none exists,
prints where to go and how to sign in, then serves on 127.0.0.1:$PORT (8000). Ctrl-C
(or SIGTERM) stops the web server and, for the embedded database, the database too.
Without a broker (no REDIS_URL) the beat schedule's jobs run on a background thread
(memoryhub.beat), so the embedded service expires, purges and backfills as production does.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import signal
import socket
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.core.management.commands.runserver import Command as RunserverCommand
from django.core.servers.basehttp import WSGIServer

from memoryhub import beat, embedded, tasks
from memoryhub.checks import database_problem
from memoryhub.models import Access, ApiKey, Project, Tenant
from memoryhub.services import apikey_create, tenant_bootstrap

DEMO_TENANT, DEMO_PROJECT, DEMO_USER = "demo", "demo", "demo"


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
            if in_process_beat is not None:
                in_process_beat.stop()
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


class PooledWSGIServer(WSGIServer):
    """Django's development server, serving requests on a fixed pool of threads.

    - A thread per request (runserver's way) opens a new database connection for every
      request, which cost more than the retrieval itself; pooled threads keep theirs
      (CONN_MAX_AGE).
    - TCP_NODELAY on each connection: the server writes headers and body separately, and
      with Nagle's algorithm and delayed ACKs every kept-alive request waited ~40 ms.
    """

    daemon_threads = True
    pool_size = 8

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._pool = ThreadPoolExecutor(max_workers=self.pool_size, thread_name_prefix="memoryhub-web")

    def get_request(self):
        conn, addr = super().get_request()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, addr

    def process_request(self, request, client_address):
        self._pool.submit(self._handle, request, client_address)

    def _handle(self, request, client_address):
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)

    def server_close(self):
        super().server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt
