"""Intent options `match` (keyword leg: all words or any word, BM25) and `fusion` (mode both: rrf or score)."""

from __future__ import annotations

import math

import pytest

from accounts.services import apikey_authenticate
from retrieval.search import BM25_B, BM25_K1, Result, Run, facts_retrieve, parse_intent, run_intent

pytestmark = pytest.mark.django_db

DIMS = 384


def write(client, text, *, participant="end-9", **extra):
    body = {"type": "acme.note", "content": {"text": text}, "scope": {"participantId": participant}, **extra}
    response = client.post("/v1/facts", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def retrieve(client, query, intents, participant="end-9"):
    response = client.post("/v1/retrieve", {"query": query, "intents": intents, "participantId": participant}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def bm25(query_terms: list[str], docs: dict[str, list[str]]) -> dict[str, float]:
    """Reference BM25 over lexeme lists (document length: distinct lexemes, as tsvector `length`)."""
    n = len(docs)
    avgdl = sum(len(set(terms)) for terms in docs.values()) / n
    out = {}
    for name, terms in docs.items():
        score = 0.0
        for term in set(query_terms):
            tf = terms.count(term)
            if not tf:
                continue
            df = sum(1 for other in docs.values() if term in other)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            score += idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * len(set(terms)) / avgdl))
        if score:
            out[name] = score
    return out


# --- validation and echo -------------------------------------------------------------------------


def test_defaults_keep_todays_intent_and_echo():
    intent = parse_intent({"scope": "same-user", "mode": "both"})
    assert (intent.match, intent.fusion) == ("all", "rrf")
    assert intent.as_dict() == {"source": "facts", "scope": "same-user", "mode": "both", "limit": 10}
    chosen = parse_intent({"scope": "same-user", "mode": "both", "match": "any", "fusion": "score", "limit": 5})
    assert chosen.as_dict() == {"source": "facts", "scope": "same-user", "mode": "both", "limit": 5, "match": "any", "fusion": "score"}
    assert parse_intent(chosen.as_dict()) == chosen  # the echo is a valid intent again
    assert parse_intent({"scope": "same-user", "mode": "keyword", "match": "all"}).as_dict()["mode"] == "keyword"


@pytest.mark.parametrize(
    "intent, field",
    [
        ({"scope": "same-user", "mode": "keyword", "match": "some"}, "intents[0].match"),
        ({"scope": "same-user", "mode": "semantic", "match": "any"}, "intents[0].match"),
        ({"scope": "same-user", "match": "any"}, "intents[0].match"),  # mode none
        ({"scope": "same-user", "mode": "both", "fusion": "max"}, "intents[0].fusion"),
        ({"scope": "same-user", "mode": "keyword", "fusion": "score"}, "intents[0].fusion"),
        ({"scope": "same-user", "mode": "both", "match": ["any"]}, "intents[0].match"),
        ({"scope": "same-user", "mode": "both", "keywordWeight": 0.7}, "intents[0].keywordWeight"),  # RRF counts places
        ({"scope": "same-user", "mode": "keyword", "keywordWeight": 0.7}, "intents[0].keywordWeight"),
        ({"scope": "same-user", "mode": "both", "fusion": "score", "keywordWeight": 1.5}, "intents[0].keywordWeight"),
        ({"scope": "same-user", "mode": "both", "fusion": "score", "keywordWeight": True}, "intents[0].keywordWeight"),
        ({"scope": "same-user", "mode": "both", "fusion": "score", "keywordWeight": "0.7"}, "intents[0].keywordWeight"),
    ],
)
def test_bad_options_are_clear_validation_errors(world, intent, field):
    response = world.client().post("/v1/retrieve", {"query": "x", "participantId": "end-9", "intents": [intent]}, format="json")
    assert response.status_code == 400
    assert field in response.json()["errors"]


# --- match any --------------------------------------------------------------------------------


def test_match_any_finds_a_fact_sharing_only_some_words(world):
    client = world.client()
    leak = write(client, "The washing machine leaks water from the bottom.")
    write(client, "end-9 likes blue sofas")
    question = "Why is my dishwasher leaking onto the kitchen floor?"
    body = retrieve(client, question, [{"scope": "same-user", "mode": "keyword", "match": "any", "limit": 3}])
    assert [h["fact"]["id"] for h in body["facts"]] == [leak["id"]]  # shares only "leak"
    hit = body["facts"][0]
    assert hit["ranks"] == {"keyword": 1}
    assert hit["score"] == 1 / 61  # the keyword mode's score is by rank, as with match all
    assert hit["intent"] == {"source": "facts", "scope": "same-user", "mode": "keyword", "limit": 3, "match": "any"}


# --- match all: every word first, then widened ---------------------------------------------------


def test_plain_query_takes_every_word_matches_first_then_facts_with_some_words_by_bm25(world):
    client = world.client()
    texts = {"all": "the washing machine leaks", "two": "washing machine manual", "rare": "it leaks", "one": "machine room", "none": "blue sofa"}
    facts = {name: write(client, text) for name, text in texts.items()}
    hits = retrieve(client, "washing machine leaks", [{"scope": "same-user", "mode": "keyword"}])["facts"]
    # Only "all" has every word; the rest follow by BM25 over the query's lexemes, as match any ranks them.
    some = {name: texts[name].split() for name in texts if name != "all"}
    expected = bm25(["washing", "machine", "leaks"], some | {"all": texts["all"].split()})
    order = ["all"] + sorted((n for n in expected if n != "all"), key=lambda n: (-expected[n], facts[n]["id"]))
    assert [h["fact"]["id"] for h in hits] == [facts[name]["id"] for name in order]
    assert "none" not in order and order[1] == "two"
    assert [h["ranks"] for h in hits] == [{"keyword": r} for r in range(1, len(order) + 1)]
    assert hits[0]["score"] == 1 / 61  # the seed's arithmetic: keyword rank 1 scores 1/61
    assert hits[0]["intent"] == {"source": "facts", "scope": "same-user", "mode": "keyword", "limit": 10}  # match all is the default


def test_search_syntax_leads_and_a_word_it_excludes_is_never_widened_to(world):
    client = world.client()
    washer = write(client, "washing machine")
    combo = write(client, "washing machine and dryer")
    leaky = write(client, "machine that leaks")
    write(client, "blue sofa")

    def ids(query):
        return [h["fact"]["id"] for h in retrieve(client, query, [{"scope": "same-user", "mode": "keyword"}])["facts"]]

    # -dryer: the literal match first; the widening adds facts with "washing" or "machine", never one with "dryer".
    assert ids('"washing machine" -dryer') == [washer["id"], leaky["id"]]
    assert ids("machine -dryer -leaks") == [washer["id"]]
    # A phrase nothing holds: the facts with its words, by BM25 (leaks is the rarer word).
    assert ids('"machine leaks"')[0] == leaky["id"] and set(ids('"machine leaks"')) == {washer["id"], combo["id"], leaky["id"]}
    # `or` is every word of either side first.
    assert set(ids("dryer or leaks")[:2]) == {combo["id"], leaky["id"]}


def test_match_any_ranks_by_bm25_so_a_rare_word_outweighs_a_common_one(world):
    client = world.client()
    texts = {"ab": "alpha beta", "ag": "alpha gamma", "ad": "alpha delta", "zb": "zeta beta", "zz": "omega"}
    facts = {name: write(client, text) for name, text in texts.items()}
    expected = bm25(["alpha", "zeta"], {name: text.split() for name, text in texts.items()})
    hits = retrieve(client, "alpha? zeta!", [{"scope": "same-user", "mode": "keyword", "match": "any"}])["facts"]
    order = sorted(expected, key=lambda name: (-expected[name], facts[name]["id"]))
    assert [h["fact"]["id"] for h in hits] == [facts[name]["id"] for name in order]
    assert order[0] == "zb"  # zeta is in 1 of 5 facts, alpha in 3
    assert [h["ranks"]["keyword"] for h in hits] == [1, 2, 3, 4]
    assert [h["score"] for h in hits] == [1 / (60 + r) for r in (1, 2, 3, 4)]


def test_match_any_ignores_search_syntax_and_stop_words(world):
    client = world.client()
    quoted = write(client, "the quoted it's back-slash minus note")
    for query in ['it\'s "quoted" \\ -minus or', "back\\slash o'neil", "minus:*"]:
        hits = retrieve(client, query, [{"scope": "same-user", "mode": "keyword", "match": "any"}])["facts"]
        assert [h["fact"]["id"] for h in hits] == [quoted["id"]], query
    assert retrieve(client, "the and of it", [{"scope": "same-user", "mode": "keyword", "match": "any"}])["facts"] == []


def test_match_any_reads_only_the_intents_scope(world):
    client = world.client()
    mine = write(client, "parcel delivery delayed", participant="end-7")
    write(client, "parcel delivery delayed", participant="end-8")
    write(client, "parcel delivery delayed")  # the project's, no participant
    write(world.client(user=world.charlie, project=world.globex_main), "parcel delivery delayed", participant="end-7")
    hits = retrieve(client, "where is my parcel", [{"scope": "same-user", "mode": "keyword", "match": "any"}], participant="end-7")["facts"]
    assert [h["fact"]["id"] for h in hits] == [mine["id"]]


def test_both_without_a_provider_falls_back_to_keyword_with_the_option(world):
    client = world.client()
    leak = write(client, "The washing machine leaks")
    body = retrieve(client, "is anything leaking?", [{"scope": "same-user", "mode": "both", "match": "any", "fusion": "score"}])
    assert [h["fact"]["id"] for h in body["facts"]] == [leak["id"]]
    assert body["facts"][0]["ranks"] == {"keyword": 1} and body["facts"][0]["score"] == 1 / 61
    assert body["facts"][0]["intent"]["match"] == "any" and body["facts"][0]["intent"]["fusion"] == "score"
    assert [w["code"] for w in body["warnings"]] == ["semantic-unavailable"]


def test_options_keep_one_query_per_intent(world, django_assert_max_num_queries):
    client = world.client()
    for i in range(30):
        write(client, f"washing machine note {i}")
    intents = [{"scope": "same-user", "mode": "keyword", "match": "any"}, {"scope": "same-user", "mode": "both", "match": "any", "fusion": "score"}]
    retrieve(client, "washing", intents)  # warm caches
    with django_assert_max_num_queries(4):  # key lookup, membership, one statement per intent
        body = retrieve(client, "washing note", intents)
    assert len(body["facts"]) == 10


# --- fusion score: exact arithmetic with hand-set embeddings ------------------------------------


class StubEmbedder:
    model = "test/stub-embedder"
    dimensions = DIMS

    def __init__(self, query_vector):
        self.query_vector = query_vector

    def embed_query(self, text):
        return self.query_vector

    def embed_documents(self, texts):  # pragma: no cover
        raise AssertionError("not used")


def unit(*weights: float) -> list[float]:
    norm = math.sqrt(sum(w * w for w in weights))
    return [w / norm for w in weights] + [0.0] * (DIMS - len(weights))


@pytest.fixture
def hand_made(world, in_scope):
    """Five facts of end-9 with chosen words and embeddings; the query is `alpha beta gamma`, its vector (1, 0)."""
    from facts.models import Fact

    client = world.client()
    rows = {  # name: (text, embedding); cosine with the query = first weight
        "x": ("alpha beta gamma", unit(0.1, math.sqrt(0.99))),
        "w": ("alpha beta", unit(0.5, 0.5)),
        "y": ("alpha", unit(1.0, 0.0)),
        "z": ("delta", unit(0.6, 0.8)),
        "v": ("epsilon", unit(0.0, 0.0, 1.0)),
    }
    facts = {}
    for name, (text, vector) in rows.items():
        facts[name] = write(client, text)
        Fact.objects.filter(id=facts[name]["id"]).update(embedding=vector, embedding_model=StubEmbedder.model)
    principal = apikey_authenticate(raw=client.raw_key)
    run = Run(principal=principal, query="alpha beta gamma", participant_id="end-9", project_id=world.desk.id)
    similarity = {name: sum(a * b for a, b in zip(vector, unit(1.0, 0.0))) for name, (_, vector) in rows.items()}
    keyword = bm25("alpha beta gamma".split(), {name: text.split() for name, (text, _) in rows.items()})
    return run, facts, similarity, keyword


def _minmax(values: dict[str, float]) -> dict[str, float]:
    lo, hi = min(values.values()), max(values.values())
    return {name: (value - lo) / (hi - lo) if hi > lo else 1.0 for name, value in values.items()}


def test_fusion_score_is_the_mean_of_min_max_normalised_leg_scores(hand_made):
    run, facts, similarity, keyword = hand_made
    intent = parse_intent({"scope": "same-user", "mode": "both", "match": "any", "fusion": "score"})
    hits = run_intent(run, intent, Result(), embedder=StubEmbedder(unit(1.0, 0.0)))
    kw_norm, sem_norm = _minmax(keyword), _minmax(similarity)
    expected = {name: 0.5 * kw_norm.get(name, 0.0) + 0.5 * sem_norm[name] for name in facts}
    by_id = {facts[name]["id"]: name for name in facts}
    got = {by_id[str(h.fact.id)]: h.score for h in hits}
    assert got == pytest.approx(expected, abs=1e-6)  # vectors are stored as float4
    assert [by_id[str(h.fact.id)] for h in hits] == sorted(expected, key=lambda n: -expected[n])
    # x leads keyword but is far from the query's meaning; y is the reverse; w is good at both.
    assert [by_id[str(h.fact.id)] for h in hits][:1] == ["w"]
    ranks = {by_id[str(h.fact.id)]: h.ranks for h in hits}
    assert ranks["x"] == {"keyword": 1, "semantic": 4} and ranks["z"] == {"semantic": 3}
    assert hits[0].intent.as_dict()["fusion"] == "score"


@pytest.mark.parametrize("weight", [0.0, 0.7, 1])
def test_keyword_weight_is_the_keyword_legs_share_of_the_score(hand_made, weight):
    run, facts, similarity, keyword = hand_made
    intent = parse_intent({"scope": "same-user", "mode": "both", "match": "any", "fusion": "score", "keywordWeight": weight})
    hits = run_intent(run, intent, Result(), embedder=StubEmbedder(unit(1.0, 0.0)))
    kw_norm, sem_norm = _minmax(keyword), _minmax(similarity)
    expected = {name: weight * kw_norm.get(name, 0.0) + (1 - weight) * sem_norm[name] for name in facts}
    by_id = {facts[name]["id"]: name for name in facts}
    assert {by_id[str(h.fact.id)]: h.score for h in hits} == pytest.approx(expected, abs=1e-6)
    assert [by_id[str(h.fact.id)] for h in hits] == sorted(expected, key=lambda n: -expected[n])
    # all semantic: y (the query's own direction) leads; all keyword: x (every word); 0.5 gives w (test above)
    assert by_id[str(hits[0].fact.id)] == {0.0: "y", 0.7: "x", 1: "x"}[weight]
    assert hits[0].intent.as_dict()["keywordWeight"] == weight
    assert parse_intent(hits[0].intent.as_dict()) == intent  # the echo is a valid intent again


def test_plain_both_is_rrf(hand_made):
    run, facts, similarity, keyword = hand_made
    for raw in ({"mode": "both"}, {"mode": "both", "match": "any"}):
        intent = parse_intent({"scope": "same-user", **raw})
        hits = run_intent(run, intent, Result(), embedder=StubEmbedder(unit(1.0, 0.0)))
        for hit in hits:
            assert hit.score == pytest.approx(sum(1 / (60 + r) for r in hit.ranks.values()))
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # RRF ranks y first (semantic 1, keyword 3), where score fusion ranks w (good at both) first.
    by_id = {facts[name]["id"]: name for name in facts}
    rrf_any = run_intent(run, parse_intent({"scope": "same-user", "mode": "both", "match": "any"}), Result(), embedder=StubEmbedder(unit(1.0, 0.0)))
    assert [by_id[str(h.fact.id)] for h in rrf_any][:3] == ["y", "w", "x"]
    # Plain both: x, the only fact with every word, leads the keyword leg; the facts with some
    # of the words follow it there by BM25 (w: two words, y: one).
    hits = run_intent(run, parse_intent({"scope": "same-user", "mode": "both"}), Result(), embedder=StubEmbedder(unit(1.0, 0.0)))
    keyword_order = sorted((h for h in hits if "keyword" in h.ranks), key=lambda h: h.ranks["keyword"])
    assert [by_id[str(h.fact.id)] for h in keyword_order] == ["x", "w", "y"]


def test_facts_retrieve_passes_the_options_through(hand_made, settings):
    run, facts, _, _ = hand_made
    settings.MEMORYHUB_EMBEDDINGS = "none"  # keyword only: the options still apply to the keyword leg
    result = facts_retrieve(run=run, intents=[parse_intent({"scope": "same-user", "mode": "keyword", "match": "any"})])
    assert [str(h.fact.id) for h in result.hits][:1] == [facts["x"]["id"]]  # all three words
    assert len(result.hits) == 3  # x, w, y: any word


def test_project_wide_bm25_counts_its_statistics_once_per_ttl(world, settings, django_assert_num_queries):
    """A whole project's statistics come from the cache after the first read; the ranking is
    the same BM25 as when they are counted, and a new fact shows once the TTL has passed."""
    from django.core.cache import cache

    client = world.client()
    texts = {"ab": "alpha beta", "ag": "alpha gamma", "ad": "alpha delta", "zb": "zeta beta", "zz": "omega"}
    facts = {name: write(client, text, participant=None) for name, text in texts.items()}
    expected = bm25(["alpha", "zeta"], {name: text.split() for name, text in texts.items()})
    intent = {"scope": "same-project", "mode": "keyword", "match": "any"}
    principal = apikey_authenticate(raw=world.key())
    run = Run(principal=principal, query="alpha zeta", project_id=principal.project_id)
    cache.clear()
    with django_assert_num_queries(2):  # the statistics, then the search
        first = run_intent(run, parse_intent(intent), Result())
    with django_assert_num_queries(1):
        again = run_intent(run, parse_intent(intent), Result())
    order = sorted(expected, key=lambda name: (-expected[name], facts[name]["id"]))
    assert [str(h.fact.id) for h in first] == [str(h.fact.id) for h in again] == [facts[name]["id"] for name in order]
    # A participant's own few facts are counted in the statement itself, never cached.
    with django_assert_num_queries(1):
        run_intent(Run(principal=principal, query="alpha", participant_id="end-9", project_id=principal.project_id),
                   parse_intent({"scope": "same-user", "mode": "keyword", "match": "any"}), Result())
    write(client, "zeta zeta omega", participant=None)
    stale = run_intent(run, parse_intent(intent), Result())
    assert len(stale) == 5  # found at once (the match is live); only n and avgdl wait for the TTL
    cache.clear()  # the TTL passing
    with django_assert_num_queries(2):
        fresh = run_intent(run, parse_intent(intent), Result())
    assert len(fresh) == 5


def test_under_rrf_the_semantic_leg_offers_its_best_limit_so_a_keyword_only_rank_one_scores_1_61(hand_made):
    run, facts, _, _ = hand_made
    by_id = {facts[name]["id"]: name for name in facts}
    embedder = StubEmbedder(unit(1.0, 0.0))
    # Semantic order: y, w, z, x, v. With limit 3 the semantic leg offers y, w, z only, so x
    # (every word: keyword rank 1, semantic rank 4) is a keyword-only hit: exactly 1/61.
    hits = run_intent(run, parse_intent({"scope": "same-user", "mode": "both", "limit": 3}), Result(), embedder=embedder)
    got = {by_id[str(h.fact.id)]: h for h in hits}
    assert [by_id[str(h.fact.id)] for h in hits] == ["y", "w", "x"]
    assert got["x"].ranks == {"keyword": 1} and got["x"].score == 1 / 61
    assert got["y"].ranks == {"keyword": 3, "semantic": 1} and got["y"].score == pytest.approx(1 / 63 + 1 / 61)
    # Score fusion keeps 4 x limit (at least 40) on both legs: x is semantic rank 4 there.
    scored = run_intent(run, parse_intent({"scope": "same-user", "mode": "both", "limit": 3, "match": "any", "fusion": "score"}), Result(), embedder=embedder)
    wide = run_intent(run, parse_intent({"scope": "same-user", "mode": "both", "limit": 10, "match": "any", "fusion": "score"}), Result(), embedder=embedder)
    assert {by_id[str(h.fact.id)]: h.ranks for h in wide}["x"] == {"keyword": 1, "semantic": 4}
    assert [h.fact.id for h in scored] == [h.fact.id for h in wide][:3]
