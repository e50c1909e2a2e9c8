"""Intent option `rerank`: the fused candidates reordered by the in-process reranker (retrieval.rerank)."""

from __future__ import annotations

import pytest

from retrieval.rerank import RERANK_DEPTH, NanoRanker, get_reranker
from retrieval.search import parse_intent

pytestmark = pytest.mark.django_db

TEXTS = [
    "The washing machine leaks water from the bottom after every cycle.",
    "Our washing machine warranty covers two years of parts.",
    "The dishwasher is loud at night.",
    "I bought a new washing machine in March.",
    "The machine shop is closed on Sundays.",
    "Water bills went up this winter.",
    "A plumber fixed the leak under the sink.",
    "The washing line in the garden broke.",
    "My machine learning course starts in May.",
    "Leaks in the roof let water into the attic.",
    "Washing powder is on the top shelf.",
    "The water heater makes a clicking sound.",
]
QUERY = "why is there water under my washing machine"


def write(client, text, participant="end-9"):
    body = {"type": "acme.note", "content": {"text": text}, "scope": {"participantId": participant}}
    response = client.post("/v1/facts", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def retrieve(client, intents, query=QUERY, participant="end-9"):
    response = client.post("/v1/retrieve", {"query": query, "intents": intents, "participantId": participant}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.parametrize(
    "intent, field",
    [
        ({"scope": "same-user", "mode": "both", "rerank": "yes"}, "intents[0].rerank"),
        ({"scope": "same-user", "rerank": True}, "intents[0].rerank"),  # mode none: nothing to rerank
        ({"source": "conversations", "scope": "same-user", "mode": "both", "rerank": True}, "intents[0].rerank"),
    ],
)
def test_bad_rerank_options_are_clear_validation_errors(world, intent, field):
    response = world.client().post("/v1/retrieve", {"query": "x", "participantId": "end-9", "intents": [intent]}, format="json")
    assert response.status_code == 400
    assert field in response.json()["errors"]


def test_rerank_orders_the_fused_candidates_by_the_models_scores_and_keeps_the_limit(world, settings):
    settings.MEMORYHUB_EMBEDDINGS = "none"  # the keyword leg alone: its order is known without a model
    client = world.client()
    facts = {write(client, text)["id"]: text for text in TEXTS}
    plain = retrieve(client, [{"scope": "same-user", "mode": "keyword", "limit": RERANK_DEPTH}])["facts"]
    candidates = [h["fact"]["id"] for h in plain]
    assert len(candidates) >= 8  # facts sharing a word of the question
    reranker = NanoRanker()
    scores = dict(zip(candidates, reranker.scores(QUERY, [facts[i] for i in candidates])))
    expected = sorted(candidates, key=lambda i: (-scores[i], candidates.index(i)))[:3]

    body = retrieve(client, [{"scope": "same-user", "mode": "keyword", "limit": 3, "rerank": True}])
    hits = body["facts"]
    assert [h["fact"]["id"] for h in hits] == expected
    assert [h["ranks"]["rerank"] for h in hits] == [1, 2, 3]
    # Each leg's rank and the fusion's score stay as they were: the reranker only orders.
    by_id = {h["fact"]["id"]: h for h in plain}
    for hit in hits:
        assert hit["ranks"]["keyword"] == by_id[hit["fact"]["id"]]["ranks"]["keyword"]
        assert hit["score"] == by_id[hit["fact"]["id"]]["score"] == 1 / (60 + hit["ranks"]["keyword"])
    assert hits[0]["intent"]["rerank"] is True
    assert [w["code"] for w in body["warnings"]] == ["semantic-unavailable"] or body["warnings"] == []


def test_rerank_reaches_past_the_limit_into_the_candidates(world, settings):
    settings.MEMORYHUB_EMBEDDINGS = "none"
    client = world.client()
    for text in TEXTS:
        write(client, text)
    fused = retrieve(client, [{"scope": "same-user", "mode": "keyword", "limit": RERANK_DEPTH}])["facts"]
    reranked = retrieve(client, [{"scope": "same-user", "mode": "keyword", "limit": 1, "rerank": True}])["facts"]
    assert len(reranked) == 1
    # The reranker's first is the best of all the candidates, wherever the fusion put it.
    assert reranked[0]["fact"]["id"] in {h["fact"]["id"] for h in fused}
    assert reranked[0]["ranks"]["rerank"] == 1


def test_without_a_reranker_the_fusions_order_stays_with_a_warning(world, settings):
    settings.MEMORYHUB_EMBEDDINGS = "none"
    settings.MEMORYHUB_RERANKER = "none"
    client = world.client()
    for text in TEXTS:
        write(client, text)
    plain = retrieve(client, [{"scope": "same-user", "mode": "keyword", "limit": 4, "rerank": False}])
    asked = retrieve(client, [{"scope": "same-user", "mode": "keyword", "limit": 4, "rerank": True}])
    assert [h["fact"]["id"] for h in asked["facts"]] == [h["fact"]["id"] for h in plain["facts"]]
    assert all("rerank" not in h["ranks"] for h in asked["facts"])
    assert "rerank-unavailable" in [w["code"] for w in asked["warnings"]]
    assert get_reranker() is None


def test_the_echo_names_rerank_only_when_it_is_not_the_default():
    for mode in ("keyword", "semantic", "both"):
        default = parse_intent({"scope": "same-user", "mode": mode})
        assert "rerank" not in default.as_dict()
        flipped = parse_intent({"scope": "same-user", "mode": mode, "rerank": not default.rerank})
        assert flipped.as_dict()["rerank"] is (not default.rerank)
        assert parse_intent(flipped.as_dict()) == flipped
    assert parse_intent({"scope": "same-user"}).rerank is False
