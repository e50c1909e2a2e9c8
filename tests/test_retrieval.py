"""POST /v1/retrieve: modes, ranks and scores, scopes, warnings, isolation, query counts."""

from __future__ import annotations

import pytest

from core import scoping

pytestmark = pytest.mark.django_db

SEED_WARNING = (
    "This retrieval keeps memory per end user, but this run names none (`participantId`), so it read and kept none. "
    "Pass the person's `participantId` on each run: the user a credential acts for may serve many people."
)


def write(client, text, *, type="acme.note", participant=None, **extra):
    body = {"type": type, "content": {"text": text}, **extra}
    if participant:
        body["scope"] = {"participantId": participant}
    response = client.post("/v1/facts", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def retrieve(client, query, intents, **extra):
    response = client.post("/v1/retrieve", {"query": query, "intents": intents, **extra}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_keyword_rank_one_scores_one_over_sixty_one(world):
    client = world.client()
    fact = write(client, "My washing machine from order 4471 leaks water from the bottom.", participant="end-9")
    write(client, "end-9 likes blue sofas", participant="end-9")
    body = retrieve(client, "washing machine leaks", [{"scope": "same-user", "mode": "keyword", "limit": 3}], participantId="end-9")
    assert [h["fact"]["id"] for h in body["facts"]] == [fact["id"]]
    hit = body["facts"][0]
    assert hit["fact"] == fact  # the same shape as a GET: content is JSON, not text
    assert hit["ranks"] == {"keyword": 1}
    assert hit["score"] == 1 / 61 == 0.01639344262295082
    assert hit["intent"] == {"source": "facts", "scope": "same-user", "mode": "keyword", "limit": 3}
    assert body["warnings"] == [] and body["recalled"] == []


def test_keyword_uses_websearch_syntax_and_ranks(world):
    client = world.client()
    a = write(client, "refund policy: refunds within 30 days of delivery")
    b = write(client, "shipping policy: we ship within 2 days")
    c = write(client, "refund refund refund: the refund desk is open on weekdays")
    hits = retrieve(client, "refund -shipping", [{"scope": "same-project", "mode": "keyword"}])["facts"]
    assert {h["fact"]["id"] for h in hits} == {a["id"], c["id"]}
    assert [h["ranks"]["keyword"] for h in hits] == [1, 2]
    # The phrase first; then (no other fact holds it) the facts with some of its words.
    quoted = retrieve(client, '"ship within"', [{"scope": "same-project", "mode": "keyword"}])["facts"]
    assert [h["fact"]["id"] for h in quoted] == [b["id"], a["id"]]


def test_mode_none_is_newest_first_and_limit_applies(world):
    client = world.client()
    ids = [write(client, f"note {i}")["id"] for i in range(5)]
    hits = retrieve(client, "anything", [{"scope": "same-project", "limit": 3}])["facts"]
    assert [h["fact"]["id"] for h in hits] == ids[::-1][:3]
    assert all(h["ranks"] == {} and h["intent"]["mode"] == "none" for h in hits)
    default = retrieve(client, "", [{"scope": "same-project"}])["facts"]
    assert len(default) == 5


def test_same_user_without_a_participant_reads_nothing_and_warns(world):
    client = world.client()
    write(client, "kept for end-7", participant="end-7")
    body = retrieve(client, "kept", [{"scope": "same-user", "mode": "keyword"}])
    assert body["facts"] == []
    assert body["warnings"] == [{"code": "memory-needs-participant", "message": SEED_WARNING}]


def test_scopes_read_only_their_own_facts(world):
    client = world.client()
    mine = write(client, "apple pie recipe", participant="end-7")
    theirs = write(client, "apple pie recipe", participant="end-8")
    project = write(client, "apple pie recipe")
    conv = "11111111-1111-1111-1111-111111111111"
    in_conv = client.post("/v1/facts", {"type": "acme.note", "content": "apple pie recipe", "scope": {"participantId": "end-7", "conversationId": conv}}, format="json").json()
    other_conv = client.post("/v1/facts", {"type": "acme.note", "content": "apple pie recipe", "scope": {"participantId": "end-7", "conversationId": "22222222-2222-2222-2222-222222222222"}}, format="json").json()
    ids = lambda body: {h["fact"]["id"] for h in body["facts"]}  # noqa: E731
    intent = lambda scope: [{"scope": scope, "mode": "keyword"}]  # noqa: E731
    assert ids(retrieve(client, "apple", intent("same-user"), participantId="end-7")) == {mine["id"]}
    assert ids(retrieve(client, "apple", intent("same-user"), participantId="end-7", conversationId=conv)) == {mine["id"], in_conv["id"]}
    assert ids(retrieve(client, "apple", intent("same-conversation"), participantId="end-7", conversationId=conv)) == {in_conv["id"]}
    assert ids(retrieve(client, "apple", intent("same-project"), participantId="end-7")) == {project["id"]}
    assert ids(retrieve(client, "apple", intent("tenant"))) == {project["id"]}
    assert theirs["id"] not in ids(retrieve(client, "apple", intent("same-user"), participantId="end-7"))
    assert other_conv["id"] not in ids(retrieve(client, "apple", intent("same-conversation"), participantId="end-7", conversationId=conv))


def test_types_filter_and_dedup_across_intents(world):
    client = world.client()
    pref = write(client, "prefers email", type="acme.preference", participant="end-7")
    write(client, "prefers email too", type="acme.note", participant="end-7")
    body = retrieve(
        client, "email",
        [{"scope": "same-user", "mode": "keyword", "types": ["acme.preference"]}, {"scope": "same-user", "mode": "keyword"}],
        participantId="end-7",
    )
    hits = body["facts"]
    assert hits[0]["fact"]["id"] == pref["id"] and hits[0]["intent"]["types"] == ["acme.preference"]
    assert len(hits) == 2 and len({h["fact"]["id"] for h in hits}) == 2


def test_pending_deleted_expired_and_invalid_facts_are_never_retrieved(world, in_scope):
    from facts.models import Fact

    client = world.client()
    live = write(client, "zebra crossing")
    gone = write(client, "zebra crossing")
    client.delete(f"/v1/facts/{gone['id']}")
    write(client, "zebra crossing", expiresAt="2001-01-01T00:00:00Z")
    write(client, "zebra crossing", validUntil="2001-01-01T00:00:00Z")
    pending = write(client, "zebra crossing")
    Fact.objects.filter(id=pending["id"]).update(status="pending")
    for mode in ("none", "keyword", "both"):
        hits = retrieve(client, "zebra", [{"scope": "same-project", "mode": mode}])["facts"]
        assert [h["fact"]["id"] for h in hits] == [live["id"]], mode


def test_semantic_without_a_provider_falls_back_to_keyword_and_warns(world):
    client = world.client()
    fact = write(client, "the washing machine leaks")
    body = retrieve(client, "washing machine", [{"scope": "same-project", "mode": "semantic"}, {"scope": "same-project", "mode": "both"}])
    assert [h["fact"]["id"] for h in body["facts"]] == [fact["id"]]
    assert body["facts"][0]["ranks"] == {"keyword": 1}
    assert [w["code"] for w in body["warnings"]] == ["semantic-unavailable"]


def test_semantic_search_finds_meaning_without_shared_words(world, local_model):
    client = world.client()
    dripping = write(client, "The appliance in the laundry room is dripping onto the floor.", participant="end-9")
    for text in ["end-9 prefers email for order updates.", "Our office opens at 9am on weekdays.", "The customer ordered a blue sofa."]:
        write(client, text, participant="end-9")
    with scoping.scopes_disabled():
        from facts.models import Fact

        assert Fact.objects.filter(embedding_model=local_model.model).count() == 4
    body = retrieve(client, "My washing machine leaks water", [{"scope": "same-user", "mode": "semantic", "limit": 4}], participantId="end-9")
    hits = body["facts"]
    assert hits[0]["fact"]["id"] == dripping["id"]
    assert hits[0]["ranks"] == {"semantic": 1}
    assert hits[0]["fact"]["embeddingModel"] == local_model.model
    keyword_only = retrieve(client, "My washing machine leaks water", [{"scope": "same-user", "mode": "keyword"}], participantId="end-9")
    assert keyword_only["facts"] == []  # no shared keyword: only meaning finds it


def test_hybrid_fuses_both_legs_with_rrf(world, local_model):
    client = world.client()
    both = write(client, "The washing machine leaks water onto the floor.", participant="end-9")
    write(client, "A washing line in the garden.", participant="end-9")
    write(client, "The appliance is dripping.", participant="end-9")
    hits = retrieve(client, "washing machine leaks", [{"scope": "same-user", "mode": "both"}], participantId="end-9")["facts"]
    top = hits[0]
    assert top["fact"]["id"] == both["id"]
    assert top["ranks"] == {"keyword": 1, "semantic": 1}
    assert top["score"] == pytest.approx(2 / 61)
    for hit in hits:
        expected = sum(1 / (60 + r) for r in hit["ranks"].values())
        assert hit["score"] == pytest.approx(expected)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_rows_of_another_model_are_never_compared(world, local_model, in_scope):
    from facts.models import Fact

    client = world.client()
    fact = write(client, "The appliance is dripping onto the floor.", participant="end-9")
    Fact.objects.filter(id=fact["id"]).update(embedding_model="some-other-model")
    hits = retrieve(client, "dripping appliance", [{"scope": "same-user", "mode": "semantic"}], participantId="end-9")["facts"]
    assert hits == []


def test_identical_text_and_embeddings_of_others_never_leak(world, local_model, in_scope):
    from facts.models import Fact

    text = "The blue notebook holds the vault combination 4471."
    mine = write(world.client(), text, participant="end-7")
    write(world.client(), text, participant="end-8")  # another participant, same project
    write(world.client(project=world.ops), text)  # another project of the tenant
    write(world.client(user=world.charlie, project=world.globex_main), text, participant="end-7")  # another tenant
    vectors = {tuple(v) for v in Fact.objects.values_list("embedding", flat=True)}
    assert len(vectors) == 1  # identical embeddings everywhere
    client = world.client()
    for mode in ("none", "keyword", "semantic", "both"):
        for scope in ("same-user", "same-project", "tenant", "same-conversation"):
            hits = retrieve(client, "vault combination", [{"scope": scope, "mode": mode}], participantId="end-7")["facts"]
            ids = {h["fact"]["id"] for h in hits}
            assert ids <= {mine["id"]}, (mode, scope, ids)
            if scope == "same-user":
                assert ids == {mine["id"]}


def test_participant_rule_applies_to_retrieval(world):
    reader = world.client(access="read")
    response = reader.post("/v1/retrieve", {"query": "x", "participantId": "end-7", "intents": [{"scope": "same-user"}]}, format="json")
    assert response.status_code == 403 and response.json()["code"] == "participant-not-allowed"
    bound = world.client(participant="end-7")
    write(world.client(), "secret of end-8", participant="end-8")
    mine = write(world.client(), "secret of end-7", participant="end-7")
    body = retrieve(bound, "secret", [{"scope": "same-user", "mode": "keyword"}])  # defaults to its participant
    assert [h["fact"]["id"] for h in body["facts"]] == [mine["id"]]
    denied = bound.post("/v1/retrieve", {"query": "x", "participantId": "end-8", "intents": [{"scope": "same-user"}]}, format="json")
    assert denied.status_code == 403


@pytest.mark.parametrize(
    "intent, field",
    [
        ({"scope": "everywhere"}, "intents[0].scope"),
        ({"scope": "same-user", "mode": "fuzzy"}, "intents[0].mode"),
        ({"scope": "same-user", "limit": 101}, "intents[0].limit"),
        ({"scope": "same-user", "limit": 0}, "intents[0].limit"),
        ({"scope": "same-user", "types": []}, "intents[0].types"),
        ({"scope": "same-user", "colour": "red"}, "intents[0].colour"),
        ({"source": "emails", "scope": "same-user"}, "intents[0].source"),
        ({"source": "conversations", "scope": "tenant"}, "intents[0].scope"),
        ({"source": "conversations", "scope": "same-user", "types": ["acme.note"]}, "intents[0].types"),
        ({"source": "conversations", "scope": "same-user", "roles": ["tool"]}, "intents[0].roles"),
        ({"source": "conversations", "scope": "same-user", "roles": []}, "intents[0].roles"),
        ({"scope": "same-segment"}, "intents[0].scope"),
        ({"scope": "same-user", "roles": ["user"]}, "intents[0].roles"),
        ({"source": "conversations", "scope": "same-user"}, "agent"),  # recall is always one agent's
    ],
)
def test_bad_intents_are_clear_validation_errors(world, intent, field):
    response = world.client().post("/v1/retrieve", {"query": "x", "intents": [intent]}, format="json")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert field in response.json()["errors"]


def test_one_query_per_intent(world, django_assert_max_num_queries):
    client = world.client()
    for i in range(30):
        write(client, f"washing machine note {i}", participant="end-7")
    retrieve(client, "washing", [{"scope": "same-user", "mode": "both"}], participantId="end-7")  # warm caches
    # key lookup, membership, then exactly one statement per intent
    with django_assert_max_num_queries(4):
        body = retrieve(client, "washing", [{"scope": "same-user", "mode": "both"}, {"scope": "same-project", "mode": "keyword"}], participantId="end-7")
    assert len(body["facts"]) == 10


def test_the_text_search_configuration_is_a_project_setting(world):
    from django.core.exceptions import ValidationError

    english = world.client()
    write(english, "She was running to the station")
    assert len(retrieve(english, "run", [{"scope": "same-project", "mode": "keyword"}])["facts"]) == 1  # stemmed
    world.ops.text_search_config = "simple"
    world.ops.full_clean()
    world.ops.save()
    simple = world.client(project=world.ops)
    write(simple, "She was running to the station")
    assert retrieve(simple, "run", [{"scope": "same-project", "mode": "keyword"}])["facts"] == []  # not stemmed
    assert len(retrieve(simple, "running", [{"scope": "same-project", "mode": "keyword"}])["facts"]) == 1
    world.ops.text_search_config = "klingon"
    with pytest.raises(ValidationError):
        world.ops.full_clean()


@pytest.mark.parametrize("exact_below", [1, 3, 8000])
def test_light_and_heavy_participants_get_the_same_semantic_ranking(world, local_model, settings, exact_below):
    """Below MEMORYHUB_EXACT_SCAN_BELOW a participant's facts are compared exactly, above it
    through HNSW; for a handful of facts both must rank alike."""
    client = world.client()
    texts = ["The appliance in the laundry room is dripping onto the floor.", "Our office opens at 9am on weekdays.",
             "The customer ordered a blue sofa.", "The dishwasher leaks a little water.", "end-9 prefers email."]
    ids = [write(client, text, participant="end-9")["id"] for text in texts]
    settings.MEMORYHUB_EXACT_SCAN_BELOW = exact_below
    hits = retrieve(client, "My washing machine leaks water", [{"scope": "same-user", "mode": "semantic", "limit": 5}], participantId="end-9")["facts"]
    assert {h["fact"]["id"] for h in hits} == set(ids)
    assert [h["ranks"]["semantic"] for h in hits] == [1, 2, 3, 4, 5]
    assert hits[0]["fact"]["id"] in (ids[0], ids[3])


def test_a_markdown_folders_layout_is_never_retrieved(world):
    """`memory.layout` facts keep a MEMORY.md folder's structure (profiles/markdown.py): never agent memory."""
    client = world.client()
    kept = write(client, "layout of the folder", participant="end-7")
    write(client, "layout of the folder", type="memory.layout", participant="end-7")
    for mode in ("none", "keyword"):
        body = retrieve(client, "layout folder", [{"scope": "same-user", "mode": mode}], participantId="end-7")
        assert [h["fact"]["id"] for h in body["facts"]] == [kept["id"]], mode
