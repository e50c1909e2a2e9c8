"""Working memory over the API (seed 000): /v1/workspaces/{ns}/... end to end, on the fact store."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models import F

from core import scoping
from facts.models import Fact, FactRevision, ToolCall

pytestmark = pytest.mark.django_db

NS = "-home-dev-shop"
SEED_BLOCK = """<memory>
Legend: workflow chain, parents before children. "key [type]: value"; "<- P" = derived from P; "(same as K)" = repeats K's fact; "<== RESUME" = continue here.
map: 1 prompt, 1 tool_result, 1 result | resume: result:build (2m ago)
prompt:build [prompt]: Add /users endpoint
tool:write_users [tool_result]: wrote handlers/users.go <- prompt:build
result:build [result]: compiles; tests pending <- tool:write_users <== RESUME
</memory>"""


def save(client, key, value, ns=NS, **extra):
    response = client.post(f"/v1/workspaces/{ns}/memory", {"key": key, "value": value, **extra}, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()


def age(world, minutes: float) -> None:
    """Move every entry of the namespace `minutes` into the past (as if written then)."""
    with scoping.scopes_disabled():
        shift = timedelta(minutes=minutes)
        Fact.objects.filter(namespace=NS).update(created_at=F("created_at") - shift, updated_at=F("updated_at") - shift)


def test_the_seeds_memory_block_character_for_character(world):
    client = world.client()
    save(client, "prompt:build", "Add /users endpoint")
    save(client, "tool:write_users", "wrote handlers/users.go")
    save(client, "result:build", "compiles; tests pending")
    age(world, 2)
    response = client.get(f"/v1/workspaces/{NS}/block")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert response.content.decode() == SEED_BLOCK
    assert int(response["X-Memory-Tokens"]) > 0 and response["X-Memory-Entries"] == "3/3"
    assert response["X-Memory-Tokenizer"]
    as_json = client.get(f"/v1/workspaces/{NS}/block", HTTP_ACCEPT="application/json").json()
    assert as_json["block"] == SEED_BLOCK and as_json["resume"] == "result:build" and as_json["total"] == 3
    ruled = client.get(f"/v1/workspaces/{NS}/block", {"standingRule": "true"}).content.decode()
    assert ruled.startswith("Check memory first. Before taking ANY action, use memory_search and memory_list")
    assert ruled.endswith(SEED_BLOCK)


def test_save_search_list_delete_speak_the_seeds_text(world):
    client = world.client()
    created = save(client, "project_name", "kdeps - Go module github.com/kdeps/kdeps/v2")
    assert created["outcome"] == "created" and created["entry"]["type"] == "note"
    save(client, "project_structure", "Monorepo layout: cmd/, pkg/ (25 packages), docs/, tests/")
    save(client, "editor", "vim")
    found = client.get(f"/v1/workspaces/{NS}/memory", {"q": "PROJECT"}).json()
    assert found["count"] == 2
    assert found["text"] == (
        "Found 2 memory entries:\n"
        "- project_name: kdeps - Go module github.com/kdeps/kdeps/v2\n"
        "- project_structure: Monorepo layout: cmd/, pkg/ (25 packages), docs/, tests/"
    )
    plain = client.get(f"/v1/workspaces/{NS}/memory", {"q": "vim"}, HTTP_ACCEPT="text/plain")
    assert plain["Content-Type"].startswith("text/plain") and plain.content.decode().startswith("Found 1 memory entries:")
    keys = client.get(f"/v1/workspaces/{NS}/memory/keys").json()
    assert keys["keys"] == ["editor", "project_name", "project_structure"]
    assert "- editor" in keys["text"]
    deleted = client.delete(f"/v1/workspaces/{NS}/memory/editor")
    assert deleted.status_code == 200 and deleted.json()["text"] == 'Deleted memory entry "editor".'
    missing = client.delete(f"/v1/workspaces/{NS}/memory/editor")
    assert missing.status_code == 404 and missing["Content-Type"] == "application/problem+json"
    assert client.get(f"/v1/workspaces/{NS}/memory/keys").json()["keys"] == ["project_name", "project_structure"]


def test_saving_a_key_again_is_its_next_revision_and_the_entries_are_facts(world):
    client = world.client()
    first = save(client, "status", "build red")
    second = save(client, "status", "build green")
    assert second["outcome"] == "superseded" and second["entry"]["factId"] == first["entry"]["factId"]
    assert second["entry"]["version"] == 2 and second["entry"]["type"] == "status"
    revisions = client.get(f"/v1/facts/{first['entry']['factId']}/revisions").json()["data"]
    assert [r["content"] for r in revisions] == ["build red", "build green"]
    listed = client.get("/v1/facts", {"namespace": NS}).json()["data"]
    assert [(f["key"], f["content"]) for f in listed] == [("status", "build green")]
    # An explicit type moves the key (one entry per key), it does not double it.
    moved = save(client, "status", "release candidate", type="fact")
    assert moved["entry"]["type"] == "fact" and moved["outcome"] == "superseded"
    assert client.get(f"/v1/workspaces/{NS}/memory/keys").json()["keys"] == ["status"]


@pytest.mark.parametrize("key, kind", [
    ("goal", "prompt"), ("why_rest", "purpose"), ("wip", "progress"), ("output", "result"), ("state", "status"),
    ("tool:exec", "tool_result"), ("thinking:1", "thinking"), ("decided_db", "decision"), ("prefer_tabs", "preference"),
    ("env", "context"), ("last_files", "file"), ("last_action", "action"), ("bug_42", "error"), ("misc", "note"),
])
def test_types_come_from_the_key(world, key, kind):
    assert save(world.client(), key, "x")["entry"]["type"] == kind


def test_bad_saves_change_nothing(world):
    client = world.client()
    cases = [
        ({"key": "k", "value": 3}, "value"),
        ({"key": "bad key!", "value": "v"}, "key"),
        ({"key": "k", "value": "v", "type": "gossip"}, "type"),
        ({"key": "k", "value": "v", "references": ["nope"]}, "references"),
        ({"key": "k", "value": "v", "colour": "red"}, "colour"),
    ]
    for body, field in cases:
        response = client.post(f"/v1/workspaces/{NS}/memory", body, format="json")
        assert response.status_code == 400, body
        assert response["Content-Type"] == "application/problem+json" and field in response.json()["errors"], response.json()
    assert client.get(f"/v1/workspaces/{NS}/memory/keys").json()["keys"] == []
    assert world.client(access="read").post(f"/v1/workspaces/{NS}/memory", {"key": "k", "value": "v"}, format="json").status_code == 403
    tenant_wide = world.client(tenant_wide=True)
    needs_project = tenant_wide.get(f"/v1/workspaces/{NS}/memory/keys")
    assert needs_project.status_code == 400 and "projectId" in needs_project.json()["errors"]
    assert tenant_wide.get(f"/v1/workspaces/{NS}/memory/keys", {"projectId": str(world.desk.id)}).status_code == 200


def test_explicit_references_draw_edges_and_namespaces_are_apart(world):
    client = world.client()
    save(client, "prompt", "ship the users API")
    save(client, "design_notes", "REST, JSON", references=["prompt"])
    save(client, "prompt", "something else entirely", ns="-home-dev-other")
    block = client.get(f"/v1/workspaces/{NS}/block").content.decode()
    assert "design_notes [note]: REST, JSON <- prompt" in block
    assert "something else" not in block
    entry = client.get(f"/v1/workspaces/{NS}/memory", {"q": "REST"}).json()["data"][0]
    assert entry["references"] == ["prompt"]


def test_budget_keeps_the_chain_and_the_prompts_entries(world):
    client = world.client()
    for index in range(40):
        save(client, f"trivia_{index:02}", f"an unrelated remark number {index} about the weather and lunch")
    save(client, "prompt:auth", "Add login with OAuth")
    save(client, "database_choice", "postgres for the sessions table")
    save(client, "progress:auth", "callback handler half written")
    whole = client.get(f"/v1/workspaces/{NS}/block", HTTP_ACCEPT="application/json").json()
    cut = client.get(f"/v1/workspaces/{NS}/block", {"budget": 120, "prompt": "which database holds sessions?"}, HTTP_ACCEPT="application/json").json()
    assert cut["tokens"] < whole["tokens"] and cut["total"] == 43 and cut["shown"] < 43
    text = cut["block"]
    assert "prompt:auth" in text and "progress:auth" in text and "<== RESUME" in text
    assert "database_choice" in text  # matches the prompt's words
    assert any(key.startswith("trivia_") for key in cut["dropped"])
    bad = client.get(f"/v1/workspaces/{NS}/block", {"budget": "lots"})
    assert bad.status_code == 400 and "budget" in bad.json()["errors"]


def test_turns_extract_markers_actions_files_tools_and_keep_tool_calls(world):
    client = world.client()
    turn = {
        "assistantText": "[MEMORY: project_name] kdeps - Go module\nAdded rate limiting middleware to the HTTP handler. "
                         "Edited src/api/handler.go and src/api/middleware.go",
        "toolCalls": [
            {"name": "write_file", "args": {"path": "src/api/handler.go"}, "result": "wrote 120 lines"},
            {"name": "read_file", "args": {"path": "README.md"}, "result": "# readme"},
        ],
        "thinking": "The limiter should sit before auth.",
    }
    response = client.post(f"/v1/workspaces/{NS}/turns", turn, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["toolCallsRecorded"] == 2
    saved = {e["key"]: e for e in body["saved"]}
    assert saved["project_name"]["value"] == "kdeps - Go module"
    assert saved["last_action"]["value"] == "rate limiting middleware to the HTTP handler"
    assert saved["last_files"]["value"] == "src/api/handler.go, src/api/middleware.go"
    tools = [k for k in saved if k.startswith("tool:")]
    assert len(tools) == 1 and tools[0].startswith("tool:write_file")  # read_file is a read-only lookup
    assert any(k.startswith("thinking:") for k in saved)
    rows = client.post(f"/v1/workspaces/{NS}/query", {"query": 'filter(tool_calls, .name == "read_file")'}, format="json").json()
    assert rows["count"] == 1 and rows["rows"][0]["args"] == {"path": "README.md"}


def test_tool_results_are_capped_at_twenty_per_tool_oldest_first(world):
    client = world.client()
    for index in range(23):
        turn = {"toolCalls": [{"name": "exec", "args": {}, "result": f"run {index:02} ok"}]}
        assert client.post(f"/v1/workspaces/{NS}/turns", turn, format="json").status_code == 201
    keys = [k for k in client.get(f"/v1/workspaces/{NS}/memory/keys").json()["keys"] if k.startswith("tool:exec")]
    assert len(keys) == 20
    values = [e["value"] for e in client.get(f"/v1/workspaces/{NS}/memory", {"q": "tool:exec"}).json()["data"]]
    assert "run 00 ok" not in values and "run 22 ok" in values
    # The pruned ones are ended (deleted), with their revisions kept until retention.
    with scoping.scopes_disabled():
        assert Fact.objects.filter(namespace=NS, key__startswith="tool:exec", status="deleted").count() == 3


def test_notes_and_facts_are_capped_at_fifty_but_structure_never(world):
    client = world.client()
    save(client, "prompt", "keep me")
    for index in range(52):
        save(client, f"remark_{index:02}", f"remark {index}")
    keys = client.get(f"/v1/workspaces/{NS}/memory/keys").json()["keys"]
    assert "prompt" in keys and "remark_00" not in keys and "remark_01" not in keys and "remark_51" in keys
    assert len([k for k in keys if k.startswith("remark_")]) == 50


def test_tool_calls_relation_keeps_the_newest_two_hundred(world):
    client = world.client()
    calls = [{"name": "read_file", "args": {"n": n}, "result": "x"} for n in range(100)]
    for _ in range(3):
        assert client.post(f"/v1/workspaces/{NS}/turns", {"toolCalls": calls}, format="json").status_code == 201
    with scoping.scopes_disabled():
        assert ToolCall.objects.filter(namespace=NS).count() == 200
    rows = client.post(f"/v1/workspaces/{NS}/query", {"query": "tool_calls", "limit": 500}, format="json").json()
    assert rows["count"] == 200 and not rows["truncated"]


def test_compaction_capture_and_checkpoint(world):
    client = world.client()
    summary = (
        "## Goal\nShip the users API\n\n## Progress\nHandlers written\n\n"
        "## Key Decisions\n- **db**: PostgreSQL for users\n- Use REST, not gRPC\n\n"
        "## Critical Context\n- **env**: staging is down on Fridays\n"
    )
    response = client.post(f"/v1/workspaces/{NS}/compactions", {"summary": summary}, format="json")
    assert response.status_code == 201, response.content
    saved = {e["key"]: e for e in response.json()["saved"]}
    checkpoint = saved["checkpoint:summary"]["value"]
    for part in ("Ship the users API", "Handlers written", "PostgreSQL for users", "staging is down on Fridays"):
        assert part in checkpoint
    types = sorted(e["type"] for k, e in saved.items() if k != "checkpoint:summary")
    assert types == ["context", "decision", "decision"]
    assert client.post(f"/v1/workspaces/{NS}/compactions", {"summary": "  "}, format="json").status_code == 400


def test_relational_queries_over_memory_tool_calls_and_tasks(world):
    client = world.client()
    save(client, "bug_login", "login fails on Safari")
    save(client, "decided_db", "postgres")
    save(client, "exec", "make test passed")
    client.post(f"/v1/workspaces/{NS}/turns", {"toolCalls": [{"name": "exec", "args": {"cmd": "make test"}, "result": "ok"}]}, format="json")
    tasks = [{"id": "t1", "desc": "fix login", "status": "open", "rounds": 2, "note": ""},
             {"id": "t2", "desc": "write docs", "status": "done", "rounds": 1, "note": "short"}]
    assert client.put(f"/v1/workspaces/{NS}/tasks", tasks, format="json").json() == tasks
    assert client.get(f"/v1/workspaces/{NS}/tasks").json() == tasks

    def query(text, **extra):
        response = client.post(f"/v1/workspaces/{NS}/query", {"query": text, **extra}, format="json")
        assert response.status_code == 200, response.content
        return response.json()

    errors = query('filter(memory, .type == "error")')
    assert [r["key"] for r in errors["rows"]] == ["bug_login"] and errors["count"] == 1 and not errors["truncated"]
    projected = query("map(memory, {key: .key, value: .value})")
    assert {"key": "decided_db", "value": "postgres"} in projected["rows"]
    joined = query('join(tool_calls, memory, "name", "key")')
    assert joined["count"] == 1 and joined["rows"][0]["left_args"] == {"cmd": "make test"}
    assert joined["rows"][0]["right_value"] == "make test passed"
    both = query('union(filter(memory, .type == "error"), filter(memory, .type == "decision"))')
    assert sorted(r["key"] for r in both["rows"]) == ["bug_login", "decided_db"]
    open_tasks = query('filter(tasks, .status != "done" && .rounds >= 2)')
    assert [r["id"] for r in open_tasks["rows"]] == ["t1"]
    capped = query("memory", limit=1)
    assert capped["count"] == 4 and len(capped["rows"]) == 1 and capped["truncated"]  # 3 saved + exec's result


def test_a_query_syntax_error_says_where_and_what_was_expected(world):
    response = world.client().post(f"/v1/workspaces/{NS}/query", {"query": 'filter(memory, .type == )'}, format="json")
    assert response.status_code == 400 and response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert body["code"] == "validation-error" and body["position"]["line"] == 1 and body["position"]["column"] == 25
    assert body["expected"] and "column 25" in body["detail"]
    for bad in [{"query": ""}, {"query": "memory", "limit": 501}, {"query": "memory", "limit": "ten"}, {"query": "nosuch"}]:
        answer = world.client().post(f"/v1/workspaces/{NS}/query", bad, format="json")
        assert answer.status_code == 400, bad


def test_bad_tasks_and_turns_change_nothing(world):
    client = world.client()
    for body in [{"id": "t1"}, [{"id": "t1", "rounds": -1}], [{"id": ""}], [{"id": "t1", "owner": "me"}], ["t1"]]:
        assert client.put(f"/v1/workspaces/{NS}/tasks", body, format="json").status_code == 400, body
    assert client.get(f"/v1/workspaces/{NS}/tasks").json() == []
    for body in [{"toolCalls": "exec"}, {"toolCalls": [{"args": {}}]}, {"assistantText": 5}]:
        assert client.post(f"/v1/workspaces/{NS}/turns", body, format="json").status_code == 400, body
    with scoping.scopes_disabled():
        assert not ToolCall.objects.exists() and not FactRevision.objects.filter(namespace=NS).exists()


def test_a_participant_bound_key_keeps_its_own_working_memory(world):
    mine = world.client(participant="end-7")
    theirs = world.client(participant="end-9")
    save(mine, "prompt", "end-7's goal")
    save(world.client(), "prompt", "the project's goal")
    assert "end-7's goal" in mine.get(f"/v1/workspaces/{NS}/block").content.decode()
    assert "end-7's goal" not in theirs.get(f"/v1/workspaces/{NS}/block").content.decode()
    assert "end-7's goal" not in world.client().get(f"/v1/workspaces/{NS}/block").content.decode()
    assert theirs.delete(f"/v1/workspaces/{NS}/memory/prompt").status_code == 404


def test_agent_tools_offer_the_working_memory_tools_on_request(world):
    client = world.client()
    agent = {"slug": "coder", "instructions": "You write code.", "memory": {"remember": {"types": ["acme.note"], "scope": "same-project"}}}
    assert client.post("/v1/agents", agent, format="json").status_code == 201
    plain = client.get("/v1/agents/coder/tools").json()["tools"]
    assert [t["name"] for t in plain] == ["memory_remember"]
    tools = client.get("/v1/agents/coder/tools", {"include": "working-memory"}).json()["tools"]
    assert [t["name"] for t in tools] == ["memory_remember", "memory_save", "memory_search", "memory_delete", "memory_list", "memory_query"]
    save_tool = tools[1]
    assert save_tool["parameters"]["required"] == ["key", "value"] and "fact" in save_tool["parameters"]["properties"]["type"]["enum"]
    assert client.get("/v1/agents/coder/tools", {"include": "everything"}).status_code == 400
