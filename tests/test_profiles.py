"""Keyed profiles (seed 002, memory.json) over the fact store.

The seed's five sessions as written, each session a fresh client with nothing but the
store between them; which keys a question is about, on the real local model and by
keywords; memory.json in and out through the API and the CLI; the participant rule; and
the optional chat-model chooser against a real HTTP server on loopback.
"""

from __future__ import annotations

import json

import pytest

from profiles.services import CALIBRATED_THRESHOLDS, NONE_FOUND
from tests.fake_chat_server import FakeChatServer, text
from tests.test_cli import cli, failed, ok

SEED_KEYS = ["name", "primary_language", "light_mode_preference", "editor"]
SEED_MEMORY = "name: Sam\nprimary_language: Go\nlight_mode_preference: on\neditor: VS Code"


def _text(response, status: int = 200) -> str:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    return response.content.decode()


class Agent:
    """One session of the seed's MemoryAgent: the five primitives, over a fresh API client."""

    def __init__(self, world, participant: str = "sam"):
        self.client = world.client()  # a new key, a new client: nothing carried over but the store
        self.base = f"/v1/profiles/{participant}"

    def save_fact(self, key: str, value: str) -> str:
        return _text(self.client.put(f"{self.base}/facts/{key}", {"value": value}, format="json"), status=201)

    def load_memory(self) -> str:
        return _text(self.client.get(self.base))

    def load_keys(self) -> str:
        return _text(self.client.get(f"{self.base}/keys"))

    def select_relevant_keys(self, question: str, available_keys: str) -> str:
        return _text(self.client.post(f"{self.base}/relevant-keys", {"question": question, "keys": available_keys}, format="json"))

    def get_facts_for_keys(self, keys: str) -> str:
        return _text(self.client.get(f"{self.base}/facts", {"keys": keys}))


def _five_sessions(world) -> None:
    # Session 1: "My name is Sam and I work mainly in Go."
    agent = Agent(world)
    assert agent.save_fact("name", "Sam") == "Saved: name = Sam"
    assert agent.save_fact("primary_language", "Go") == "Saved: primary_language = Go"
    assert agent.load_memory() == "name: Sam\nprimary_language: Go"

    # Session 2: "I also prefer light mode and use VS Code."
    agent = Agent(world)
    assert agent.save_fact("light_mode_preference", "on") == "Saved: light_mode_preference = on"
    assert agent.save_fact("editor", "VS Code") == "Saved: editor = VS Code"
    assert agent.load_memory() == SEED_MEMORY

    # Session 3: "What do you know about me?"
    assert Agent(world).load_memory() == SEED_MEMORY

    # Session 4: "What editor do I use?"
    agent = Agent(world)
    keys = agent.load_keys()
    assert keys == "name, primary_language, light_mode_preference, editor"
    relevant = agent.select_relevant_keys("What editor do I use?", keys)
    assert relevant == "editor"
    assert agent.get_facts_for_keys(relevant) == "editor: VS Code"

    # Session 5: "What coffee brand do I drink?"
    agent = Agent(world)
    relevant = agent.select_relevant_keys("What coffee brand do I drink?", agent.load_keys())
    assert relevant == ""
    assert agent.get_facts_for_keys(relevant) == "No results found."


@pytest.mark.django_db
def test_seed_five_sessions_by_keywords(world):
    _five_sessions(world)


@pytest.mark.django_db
def test_seed_five_sessions_by_meaning_on_the_local_model(world, local_model):
    _five_sessions(world)


@pytest.mark.django_db
def test_seed_sessions_through_the_python_client_and_a_live_server(live_server, tx_world):
    from memoryhub.client import MemoryHub

    def session():
        return MemoryHub(url=live_server.url, api_key=tx_world.key())

    with session() as hub:
        assert hub.profile_save("sam", "name", "Sam")["text"] == "Saved: name = Sam"
        assert hub.profile_save("sam", "primary_language", "Go")["outcome"] == "created"
    with session() as hub:
        hub.profile_save("sam", "light_mode_preference", "on")
        hub.profile_save("sam", "editor", "VS Code")
    with session() as hub:
        assert hub.profile_memory("sam") == {"name": "Sam", "primary_language": "Go", "light_mode_preference": "on", "editor": "VS Code"}
    with session() as hub:
        relevant = hub.profile_relevant_keys("sam", "What editor do I use?", hub.profile_keys("sam"))
        assert relevant["keys"] == ["editor"]
        assert hub.profile_facts("sam", relevant["keys"])["text"] == "editor: VS Code"
    with session() as hub:
        relevant = hub.profile_relevant_keys("sam", "What coffee brand do I drink?")
        assert relevant["keys"] == [] and relevant["text"] == ""
        assert hub.profile_facts("sam", relevant["keys"]) == {"facts": {}, "text": NONE_FOUND}


def _seed_profile(client, participant: str = "sam", extra: dict | None = None) -> None:
    values = {"name": "Sam", "primary_language": "Go", "light_mode_preference": "on", "editor": "VS Code", **(extra or {})}
    for key, value in values.items():
        assert client.put(f"/v1/profiles/{participant}/facts/{key}", {"value": value}, format="json").status_code == 201


def _relevant(client, question: str, participant: str = "sam") -> dict:
    response = client.post(f"/v1/profiles/{participant}/relevant-keys", {"question": question}, format="json", HTTP_ACCEPT="application/json")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.django_db
def test_relevant_keys_by_meaning_pick_the_key_and_return_none_rather_than_a_guess(world, local_model):
    client = world.client()
    _seed_profile(client)
    threshold = CALIBRATED_THRESHOLDS[local_model.model]

    editor = _relevant(client, "What editor do I use?")
    assert editor["keys"] == ["editor"] and editor["method"] == "embeddings+keywords"
    assert editor["scores"]["editor"] >= threshold

    coffee = _relevant(client, "What coffee brand do I drink?")
    assert coffee["keys"] == [] and coffee["text"] == ""
    assert max(coffee["scores"].values()) < threshold  # no key is close enough: none, not the nearest

    # By meaning where no word is shared: an IDE is an editor, dark mode is about light mode.
    assert _relevant(client, "What IDE do I code in?")["keys"] == ["editor"]
    assert _relevant(client, "Do I like dark mode?")["keys"] == ["light_mode_preference"]
    assert _relevant(client, "What is my name?")["keys"] == ["name"]
    # Keywords catch what the model scores low: "language" is in the key.
    assert _relevant(client, "Which programming language do I work in?")["keys"] == ["primary_language"]
    assert _relevant(client, "What is the capital of France?")["keys"] == []


@pytest.mark.django_db
def test_relevant_keys_without_embeddings_use_stemmed_keywords(world):
    client = world.client()
    _seed_profile(client, extra={"favoriteCoffee": "Lavazza"})
    assert _relevant(client, "Which languages do I use?") | {"scores": None} == {
        "keys": ["primary_language"], "method": "keywords", "scores": None, "warnings": [], "text": "primary_language",
    }
    assert _relevant(client, "What editor do I use?")["keys"] == ["editor"]
    assert _relevant(client, "Is my coffee still Lavazza?")["keys"] == ["favoriteCoffee"]  # camelCase keys split into words
    assert _relevant(client, "What tea do I drink?")["keys"] == []
    assert _relevant(client, "What do you know about me?")["keys"] == []  # stop words only: nothing to go on


@pytest.mark.django_db
def test_relevant_keys_choose_only_among_the_keys_given(world):
    client = world.client()
    _seed_profile(client)
    ask = lambda keys: client.post("/v1/profiles/sam/relevant-keys", {"question": "What editor do I use?", "keys": keys}, format="json")  # noqa: E731
    assert _text(ask("name, editor")) == "editor"
    assert _text(ask(["name", "primary_language"])) == ""
    assert _text(ask("")) == ""
    assert _text(client.post("/v1/profiles/nobody/relevant-keys", {"question": "What editor do I use?"}, format="json")) == ""


@pytest.mark.django_db
def test_save_fact_overwrites_the_key_as_its_next_revision(world):
    client = world.client()
    created = client.put("/v1/profiles/sam/facts/editor", {"value": "Vim"}, format="json")
    assert _text(created, 201) == "Saved: editor = Vim"
    changed = client.put("/v1/profiles/sam/facts/editor", {"value": "VS Code"}, format="json", HTTP_ACCEPT="application/json")
    assert changed.status_code == 200
    body = changed.json()
    assert (body["outcome"], body["version"], body["value"], body["text"]) == ("updated", 2, "VS Code", "Saved: editor = VS Code")
    same = client.put("/v1/profiles/sam/facts/editor", {"value": "VS Code"}, format="json", HTTP_ACCEPT="application/json").json()
    assert (same["outcome"], same["version"], same["factId"]) == ("unchanged", 2, body["factId"])

    # The same fact everywhere else: one live profile fact, two revisions.
    listed = client.get("/v1/facts", {"type": "profile", "participantId": "sam"}).json()["data"]
    assert [(f["key"], f["content"], f["version"]) for f in listed] == [("editor", "VS Code", 2)]
    revisions = client.get(f"/v1/facts/{body['factId']}/revisions").json()["data"]
    assert [r["content"] for r in revisions] == ["Vim", "VS Code"]
    assert _text(client.get("/v1/profiles/sam")) == "editor: VS Code"


@pytest.mark.django_db
def test_get_facts_for_keys_answers_in_the_order_asked_or_no_results_found(world):
    client = world.client()
    _seed_profile(client)
    get = lambda keys: _text(client.get("/v1/profiles/sam/facts", {"keys": keys}))  # noqa: E731
    assert get("editor, name,coffee") == "editor: VS Code\nname: Sam"
    assert get("coffee") == "No results found."
    assert get("") == "No results found."
    assert _text(client.get("/v1/profiles/sam/facts")) == "No results found."
    as_json = client.get("/v1/profiles/sam/facts", {"keys": "editor,coffee"}, HTTP_ACCEPT="application/json").json()
    assert as_json == {"facts": {"editor": "VS Code"}, "text": "editor: VS Code"}


@pytest.mark.django_db
def test_profile_reads_take_the_same_queries_however_many_keys(world):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = world.client()
    _seed_profile(client)

    def queries(path: str, **params) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(path, params).status_code == 200
        return len(captured)

    before = [queries("/v1/profiles/sam"), queries("/v1/profiles/sam/keys"), queries("/v1/profiles/sam/facts", keys="name,editor")]
    client.post("/v1/profiles/sam/import", {"memory": {f"key_{i}": f"value {i}" for i in range(50)}}, format="json")
    after = [queries("/v1/profiles/sam"), queries("/v1/profiles/sam/keys"), queries("/v1/profiles/sam/facts", keys="name,editor,key_7")]
    assert after == before


@pytest.mark.django_db
def test_load_memory_and_keys_as_json(world):
    client = world.client()
    assert _text(client.get("/v1/profiles/sam")) == NONE_FOUND
    assert _text(client.get("/v1/profiles/sam/keys")) == ""
    _seed_profile(client)
    memory = client.get("/v1/profiles/sam", HTTP_ACCEPT="application/json").json()
    assert list(memory["memory"]) == SEED_KEYS and memory["text"] == SEED_MEMORY
    keys = client.get("/v1/profiles/sam/keys", HTTP_ACCEPT="application/json").json()
    assert keys == {"keys": SEED_KEYS, "text": ", ".join(SEED_KEYS)}


@pytest.mark.django_db
def test_a_profile_follows_the_participant_rule(world):
    owner = world.client()
    _seed_profile(owner, participant="end-7")
    reader = world.client(access="read")
    for response in (reader.get("/v1/profiles/end-7"), reader.put("/v1/profiles/end-7/facts/x", {"value": "y"}, format="json")):
        assert response.status_code == 403 and response.json()["code"] == "participant-not-allowed"
        assert response["Content-Type"] == "application/problem+json"

    bound = world.client(participant="end-7")
    assert _text(bound.get("/v1/profiles/end-7/facts", {"keys": "name"})) == "name: Sam"
    assert _text(bound.put("/v1/profiles/end-7/facts/city", {"value": "Lisbon"}, format="json"), 201) == "Saved: city = Lisbon"
    refused = bound.get("/v1/profiles/end-9", HTTP_ACCEPT="text/plain")
    assert refused.status_code == 403 and refused["Content-Type"] == "application/problem+json"
    assert refused.json()["code"] == "participant-not-allowed"

    # Another project or tenant naming end-7 reaches its own end-7: nothing of the owner's.
    for other in (world.client(project=world.ops), world.client(user=world.charlie, project=world.globex_main)):
        assert _text(other.get("/v1/profiles/end-7")) == NONE_FOUND
        assert _text(other.get("/v1/profiles/end-7/facts", {"keys": "name"})) == NONE_FOUND
    # A tenant-wide key names the project.
    tenant_key = world.client(tenant_wide=True)
    assert tenant_key.get("/v1/profiles/end-7").json()["code"] == "validation-error"
    assert _text(tenant_key.get("/v1/profiles/end-7", {"projectId": str(world.desk.id)})).startswith("name: Sam")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path, body, field",
    [
        ("/v1/profiles/sam/facts/favorite color", {"value": "blue"}, "key"),
        ("/v1/profiles/sam/facts/color", {"value": None}, "value"),
        ("/v1/profiles/sam/facts/color", {}, "value"),
        ("/v1/profiles/sam/facts/color", {"value": "blue", "type": "x"}, "type"),
        ("/v1/profiles/sam/facts/color", ["blue"], None),
    ],
)
def test_a_bad_save_is_refused_and_changes_nothing(world, path, body, field):
    client = world.client()
    response = client.put(path, body, format="json")
    assert response.status_code == 400 and response.json()["code"] == "validation-error"
    if field:
        assert field in response.json()["errors"]
    assert client.get("/v1/facts", {"participantId": "sam"}).json()["data"] == []


@pytest.mark.django_db
def test_a_question_is_required(world):
    client = world.client()
    for body in ({}, {"question": ""}, {"question": "x" * 2001}, {"question": "editor?", "keys": 7}):
        response = client.post("/v1/profiles/sam/relevant-keys", body, format="json")
        assert response.status_code == 400 and response.json()["code"] == "validation-error", body


# --- memory.json in and out -------------------------------------------------------------------

MEMORY_JSON = {
    "name": "Sam",
    "primary_language": "Go",
    "light_mode_preference": "on",
    "editor": "VS Code",
    "greeting": "Olá, 你好 — «quotes» and \"escapes\"\nsecond line",
    "age": 41,
    "height_m": 1.82,
    "vegetarian": False,
    "languages": ["Go", "Python", {"level": "learning", "name": "Rust"}],
    "address": {"city": "Lisbon", "geo": [38.71, -9.14], "zip": "1100-148"},
    "empty": "",
}


@pytest.mark.django_db
def test_memory_json_round_trips_without_loss(world):
    client = world.client()
    imported = client.post("/v1/profiles/sam/import", {"memory": MEMORY_JSON}, format="json")
    assert imported.status_code == 200, imported.content
    assert imported.json() == {"created": list(MEMORY_JSON), "updated": [], "unchanged": [], "removed": []}
    exported = client.get("/v1/profiles/sam", HTTP_ACCEPT="application/json").json()["memory"]
    assert json.dumps(exported, indent=2, ensure_ascii=False) == json.dumps(MEMORY_JSON, indent=2, ensure_ascii=False)
    assert [type(v) for v in exported.values()] == [type(v) for v in MEMORY_JSON.values()]  # 41 stays an int, False a bool

    # Keys inside a value come back sorted (their order is not kept: PostgreSQL normalises
    # JSON objects); the value is the same, and from then on every round trip is byte-identical.
    client.post("/v1/profiles/sam/import", {"memory": {"address": {"zip": "1100-148", "geo": [38.71, -9.14], "city": "Lisbon"}}}, format="json")
    assert client.get("/v1/profiles/sam", HTTP_ACCEPT="application/json").json()["memory"] == exported

    # Importing the export again changes nothing: no new revisions.
    again = client.post("/v1/profiles/sam/import", {"memory": exported}, format="json").json()
    assert again == {"created": [], "updated": [], "unchanged": list(MEMORY_JSON), "removed": []}
    assert {f["version"] for f in client.get("/v1/facts", {"type": "profile", "participantId": "sam"}).json()["data"]} == {1}

    # A changed value is the key's next revision, a new key goes last; replace ends the missing ones.
    changed = dict(exported, editor="Helix", pager="less")
    del changed["empty"]
    report = client.post("/v1/profiles/sam/import", {"memory": changed, "replace": True}, format="json").json()
    assert (report["updated"], report["created"], report["removed"]) == (["editor"], ["pager"], ["empty"])
    assert list(client.get("/v1/profiles/sam", HTTP_ACCEPT="application/json").json()["memory"]) == list(changed)


@pytest.mark.django_db
def test_a_bad_memory_json_is_refused_whole(world):
    client = world.client()
    for memory in ({"name": "Sam", "favorite color": "blue"}, {"name": "Sam", "nothing": None}, ["name", "Sam"]):
        response = client.post("/v1/profiles/sam/import", {"memory": memory}, format="json")
        assert response.status_code == 400 and response.json()["code"] == "validation-error", memory
    assert "memory.favorite color" in client.post("/v1/profiles/sam/import", {"memory": {"favorite color": "x"}}, format="json").json()["errors"]
    assert client.get("/v1/facts", {"participantId": "sam"}).json()["data"] == []  # "name" was not written either


def test_profiles_import_and_export_through_the_cli(live_server, tx_world, tmp_path):
    url, key = live_server.url, tx_world.key()
    source = tmp_path / "memory.json"
    source.write_text(json.dumps(MEMORY_JSON, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    report = ok(cli(url, key, "profiles", "import", str(source), "--participant", "end-7"))
    assert report["created"] == list(MEMORY_JSON)
    assert ok(cli(url, key, "profiles", "import", str(source), "--participant", "end-7"))["unchanged"] == list(MEMORY_JSON)

    written = tmp_path / "out" / "memory.json"
    written.parent.mkdir()
    assert ok(cli(url, key, "profiles", "export", "--participant", "end-7", "--output", str(written))) == {
        "participantId": "end-7", "file": str(written), "keys": len(MEMORY_JSON),
    }
    assert written.read_bytes() == source.read_bytes()  # byte for byte
    printed = cli(url, key, "profiles", "export", "--participant", "end-7")
    assert printed.returncode == 0 and printed.stdout.encode() == source.read_bytes()

    # export -> import into another participant -> export: the same file again
    ok(cli(url, key, "profiles", "import", str(written), "--participant", "end-8"))
    assert cli(url, key, "profiles", "export", "--participant", "end-8").stdout == printed.stdout

    assert "FILE" in failed(cli(url, key, "profiles", "import", "-", "--participant", "end-7", stdin="[1, 2]"), 2)
    err = failed(cli(url, tx_world.key(access="read"), "profiles", "export", "--participant", "end-7"), 1)
    assert "participant-not-allowed" in err


# --- the optional chat-model chooser ------------------------------------------------------------------


@pytest.fixture
def chat(settings):
    with FakeChatServer([], model="tiny-chooser") as server:  # each test scripts its answers
        settings.MEMORYHUB_PROFILE_LLM_URL = server.url
        settings.MEMORYHUB_PROFILE_LLM_MODEL = "tiny-chooser"
        settings.MEMORYHUB_PROFILE_LLM_API_KEY = "sk-test"
        yield server


@pytest.mark.django_db
def test_a_chat_model_refines_the_choice_and_sees_key_names_only(world, chat):
    client = world.client()
    _seed_profile(client)
    chat.script.append(text("editor, primary_language"))
    found = _relevant(client, "Which tools do I code with?")
    assert (found["keys"], found["method"]) == (["primary_language", "editor"], "llm")
    body = chat.requests[-1]
    assert chat.calls[-1] == {"path": "/v1/chat/completions", "auth": "Bearer sk-test"}
    assert body["model"] == "tiny-chooser"
    prompt = body["messages"][-1]["content"]
    assert "Which tools do I code with?" in prompt and "light_mode_preference" in prompt
    assert "VS Code" not in json.dumps(body) and "Sam" not in json.dumps(body)  # values stay home

    chat.script.append(text("coffee_brand"))  # not a key: dropped, none rather than a guess
    assert _relevant(client, "What coffee brand do I drink?")["keys"] == []
    chat.script.append(text("NONE"))
    assert _relevant(client, "What editor do I use?")["keys"] == []


@pytest.mark.django_db
def test_without_an_answer_from_the_chat_model_the_first_choice_stands(world, chat, settings):
    client = world.client()
    _seed_profile(client)
    assert chat.script == []  # nothing scripted: the server answers 500
    found = _relevant(client, "What editor do I use?")
    assert (found["keys"], found["method"]) == (["editor"], "keywords")
    assert [w["code"] for w in found["warnings"]] == ["llm-unavailable"]
    settings.MEMORYHUB_PROFILE_LLM_URL = "http://127.0.0.1:9/v1"  # nothing listens there
    assert _relevant(client, "What editor do I use?")["keys"] == ["editor"]
