"""The `memoryhub` CLI against a live server: the seed's "Write and read facts" and
"Change, verify, delete" flow, command for command, plus the error cases.

The CLI runs as a real subprocess (`python -m memoryhub.cli`) with MEMORYHUB_URL and
MEMORYHUB_API_KEY, as a user would run it. The live server needs committed data, hence
`tx_world`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WASHING_TEXT = "end-7 orders spare parts for a washing machine."
WASHING_HASH = "sha256:f7de1d8940eba40c71e365c8e853f9cc631c6948e8b17e786417b116cdee69bc"


def cli(server_url: str | None, key: str | None, *args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {name: value for name, value in os.environ.items() if not name.startswith("MEMORYHUB_")}
    if server_url is not None:
        env["MEMORYHUB_URL"] = server_url
    if key is not None:
        env["MEMORYHUB_API_KEY"] = key
    return subprocess.run(
        [sys.executable, "-m", "memoryhub.cli", *args],
        input=stdin, capture_output=True, text=True, env=env, cwd=cwd or ROOT, timeout=60,
    )


def ok(result: subprocess.CompletedProcess):
    assert result.returncode == 0, f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert result.stderr == ""
    return json.loads(result.stdout) if result.stdout.strip() else None


def failed(result: subprocess.CompletedProcess, code: int) -> str:
    assert result.returncode == code, f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    return result.stderr


def _parse(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def test_seed_flow_command_for_command(live_server, tx_world, tmp_path):
    world, url = tx_world, live_server.url
    key = world.key()
    (tmp_path / "fact.json").write_text(
        json.dumps({"type": "acme.note", "content": {"text": WASHING_TEXT}, "scope": {"projectId": str(world.desk.id), "participantId": "end-7"}})
    )

    # facts write --input=@fact.json
    fact = ok(cli(url, key, "facts", "write", "--input=@fact.json", cwd=tmp_path))
    fact_id = fact["id"]
    assert fact["type"] == "acme.note"
    assert fact["version"] == 1
    assert fact["content"] == {"text": WASHING_TEXT}
    assert fact["contentHash"] == WASHING_HASH
    assert fact["size"] == 58
    assert fact["trust"] == "asserted"
    assert fact["scope"]["projectId"] == str(world.desk.id)
    assert fact["scope"]["participantId"] == "end-7"
    assert fact["attributedTo"] == {"id": str(world.alice.pk), "kind": "user"}

    # facts list --type=acme.note ; facts get ID
    listed = ok(cli(url, key, "facts", "list", "--type=acme.note"))
    assert [f["id"] for f in listed["data"]] == [fact_id]
    assert listed["nextCursor"] is None
    assert ok(cli(url, key, "facts", "list", "--type=acme.other"))["data"] == []
    got = ok(cli(url, key, "facts", "get", fact_id))
    # embeddingModel may be filled in after the write commits (the embedding task runs then)
    assert {**got, "embeddingModel": None} == {**fact, "embeddingModel": None}

    # facts supersede ID --input='{"content":"Prefers phone"}' --expect-version=1
    two = ok(cli(url, key, "facts", "supersede", fact_id, '--input={"content":"Prefers phone"}', "--expect-version=1"))
    assert (two["id"], two["version"], two["content"]) == (fact_id, 2, "Prefers phone")

    # facts verify ID
    three = ok(cli(url, key, "facts", "verify", fact_id))
    assert three["version"] == 3
    assert three["trust"] == "verified"
    assert three["verifiedBy"] == str(world.alice.pk)
    assert three["verifiedAt"]

    # facts revisions ID
    revisions = ok(cli(url, key, "facts", "revisions", fact_id))["data"]
    assert [r["version"] for r in revisions] == [1, 2, 3]
    assert [r["invalidationReason"] for r in revisions] == ["superseded", "superseded", None]

    # facts get ID --as-of=<between the first write and the supersede> → revision 1
    first_at, second_at = _parse(revisions[0]["updatedAt"]), _parse(revisions[1]["updatedAt"])
    assert first_at < second_at
    between = (first_at + (second_at - first_at) / 2).isoformat().replace("+00:00", "Z")
    earlier = ok(cli(url, key, "facts", "get", fact_id, f"--as-of={between}"))
    assert (earlier["version"], earlier["content"]) == (1, {"text": WASHING_TEXT})
    # ... and the seed's own example date, before the fact existed: not found
    assert "not-found" in failed(cli(url, key, "facts", "get", fact_id, "--as-of=2026-10-01T00:00:00Z"), 1)

    # facts get ID --revision=1
    one = ok(cli(url, key, "facts", "get", fact_id, "--revision=1"))
    assert (one["version"], one["contentHash"], one["invalidationReason"]) == (1, WASHING_HASH, "superseded")

    # facts delete ID ; facts get ID → status deleted, and no list shows it
    assert ok(cli(url, key, "facts", "delete", fact_id)) == {"id": fact_id, "deleted": True}
    gone = ok(cli(url, key, "facts", "get", fact_id))
    assert gone["status"] == "deleted"
    assert ok(cli(url, key, "facts", "list", "--type=acme.note"))["data"] == []


def test_stdin_input_and_version_errors(live_server, tx_world):
    world, url = tx_world, live_server.url
    key = world.key()
    fact = ok(cli(url, key, "facts", "write", "--input=-", stdin=json.dumps({"type": "acme.preference", "content": "Prefers email", "scope": {"participantId": "end-7"}})))
    assert fact["version"] == 1 and fact["content"] == "Prefers email"

    stale = failed(cli(url, key, "facts", "supersede", fact["id"], '--input={"content":"Prefers phone"}', "--expect-version=7"), 1)
    assert "version-conflict" in stale and "409" in stale

    # no --expect-version: the CLI sends none and the server asks for one
    missing = failed(cli(url, key, "facts", "supersede", fact["id"], "--input=-", stdin='{"content":"Prefers phone"}'), 1)
    assert "precondition-required" in missing and "428" in missing and "--expect-version" in missing

    assert ok(cli(url, key, "facts", "get", fact["id"]))["version"] == 1


def test_batch_and_paging_through_the_cli(live_server, tx_world, tmp_path):
    world, url = tx_world, live_server.url
    key = world.key()
    batch = {"facts": [{"type": "acme.note", "content": f"note {i}", "scope": {"participantId": "end-7"}} for i in range(5)]}
    (tmp_path / "facts.json").write_text(json.dumps(batch))
    written = ok(cli(url, key, "facts", "batch", f"--input=@{tmp_path / 'facts.json'}"))["facts"]
    assert [f["content"] for f in written] == [f"note {i}" for i in range(5)]

    page = ok(cli(url, key, "facts", "list", "--participant-id=end-7", "--limit=2"))
    assert len(page["data"]) == 2 and page["nextCursor"]
    everything = ok(cli(url, key, "facts", "list", "--participant-id=end-7", "--limit=2", "--all"))
    assert sorted(f["id"] for f in everything["data"]) == sorted(f["id"] for f in written)
    assert everything["nextCursor"] is None


def test_missing_or_bad_key_and_bad_input(live_server, tx_world):
    url = live_server.url
    err = failed(cli(url, None, "facts", "list"), 2)
    assert "MEMORYHUB_API_KEY" in err

    err = failed(cli(url, "mh_not_a_key", "facts", "list"), 1)
    assert "unauthenticated" in err and "401" in err

    err = failed(cli(url, tx_world.key(), "facts", "write", "--input={not json"), 2)
    assert "not valid JSON" in err


def test_read_key_cannot_write(live_server, tx_world):
    read_key = tx_world.key(access="read")
    err = failed(cli(live_server.url, read_key, "facts", "write", '--input={"type":"acme.note","content":"hi"}'), 1)
    assert "forbidden" in err and "403" in err
    assert ok(cli(live_server.url, read_key, "facts", "list"))["data"] == []


def test_cli_imports_no_django():
    code = "import sys, memoryhub.cli, memoryhub.client; assert not any(m == 'django' or m.startswith('django.') for m in sys.modules), 'django imported'"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "argv, message",
    [
        (["facts", "get", "x", "--revision=1", "--as-of=2026-10-01T00:00:00Z"], "not allowed with"),
        (["facts", "supersede", "x", '--input={"text":"no content"}'], "content"),
        (["facts", "write", "--input=@/nonexistent/fact.json"], "cannot read"),
        (["facts"], "required"),
    ],
)
def test_usage_errors_exit_2(argv, message, capsys, monkeypatch):
    from memoryhub.cli import main

    monkeypatch.setenv("MEMORYHUB_API_KEY", "mh_unused")
    monkeypatch.setenv("MEMORYHUB_URL", "http://127.0.0.1:9")  # nothing is sent for these
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err


def test_first_hour_rough_edges(live_server, tx_world, tmp_path):
    """What a new user trips on: MEMORYHUB_URL copied with /v1, a missing key, the participant
    flag spelled as another command spells it, userId's type."""
    url, world = live_server.url, tx_world
    key = world.key()
    # The API's root, /v1, as people copy it: it reaches the server, not /v1/v1/... (404).
    assert ok(cli(url + "/v1", key, "me"))["tenant"] == "acme"
    assert ok(cli(url + "/v1/", key, "me"))["tenant"] == "acme"

    # No key: how to get one, in the words of the README (make run, manage.py apikey create).
    err = failed(cli(url, None, "facts", "list"), 2)
    assert "make run" in err and "manage.py apikey create --user U --project T/P" in err and "manage.py serve" not in err

    # --participant and --participant-id are one flag in every command that takes a participant.
    written = ok(cli(url, key, "facts", "write", '--input={"type":"acme.note","content":{"text":"hi"},"scope":{"participantId":"end-7"}}'))
    assert [f["id"] for f in ok(cli(url, key, "facts", "list", "--participant", "end-7"))["data"]] == [written["id"]]
    assert ok(cli(url, key, "facts", "list", "--participant", "end-8"))["data"] == []
    (tmp_path / "memory.json").write_text(json.dumps({"city": "Lyon"}))
    imported = ok(cli(url, key, "profiles", "import", str(tmp_path / "memory.json"), "--participant-id", "end-9"))
    assert imported is not None
    assert json.loads(cli(url, key, "profiles", "export", "--participant-id", "end-9").stdout) == {"city": "Lyon"}
    out = ok(cli(url, key, "markdown", "export", "--dir", str(tmp_path / "md"), "--participant-id", "end-9"))
    assert out is not None and (tmp_path / "md" / "MEMORY.md").exists()

    # userId is a string wherever it appears, as in /v1/me.
    me = ok(cli(url, key, "me"))
    from memoryhub.client import MemoryHub

    with MemoryHub(url, key) as hub:
        hub.agents_create({"slug": "acme.first", "instructions": "hi", "retrieval": [], "memory": {}})
        conversation = hub.conversations_create("acme.first", participant_id="end-7")
        (message,) = hub.messages_append(conversation["id"], [{"role": "user", "text": "hello"}])
        listed = hub.messages_list(conversation["id"])["data"]
    assert isinstance(me["userId"], str) and message["userId"] == listed[0]["userId"] == me["userId"]


def test_admin_commands_manage_members_keys_and_retention(live_server, tx_world):
    """`memoryhub members|keys|retention`: the admin API from a shell, with its rights."""
    world, url = tx_world, live_server.url
    admin = world.key()  # alice, the tenant's admin

    member = ok(cli(url, admin, "members", "set", "bob", "--role", "writer"))
    assert (member["username"], member["role"]) == ("bob", "writer")
    assert "bob" in {m["username"] for m in ok(cli(url, admin, "members", "list"))["data"]}

    created = ok(cli(url, admin, "keys", "create", "--access", "read", "--user", "bob", "--participant", "end-7", "--name", "bot"))
    assert created["apiKey"].startswith("mh_") and created["participantId"] == "end-7"
    listed = ok(cli(url, admin, "keys", "list"))["data"]
    assert created["id"] in {k["id"] for k in listed} and all("apiKey" not in k for k in listed)
    assert ok(cli(url, created["apiKey"], "me"))["participantId"] == "end-7"
    assert ok(cli(url, admin, "keys", "revoke", created["id"])) == {"id": created["id"], "revoked": True}
    assert "unauthenticated" in failed(cli(url, created["apiKey"], "me"), 1)

    kept = ok(cli(url, admin, "retention", "set", "--deleted-facts-days", "30", "--expired-facts-days", "forever",
                  "--unregistered-conversations-days", "7"))
    assert (kept["deletedFactsDays"], kept["expiredFactsDays"], kept["unregisteredConversationsDays"]) == (30, None, 7)
    assert ok(cli(url, admin, "retention", "get")) == kept

    # A writer is not an admin: the same rights as the dashboard's settings pages.
    writer = world.key(user=world.bob)
    assert "forbidden" in failed(cli(url, writer, "keys", "create", "--access", "write"), 1)
    assert ok(cli(url, admin, "members", "remove", "bob")) == {"user": "bob", "removed": True}
    assert "bob" not in {m["username"] for m in ok(cli(url, admin, "members", "list"))["data"]}
