"""Same-user reads run as prepared statements (retrieval.search), except for people known to
hold many facts: the same answers, the same isolation, one statement per intent."""

from __future__ import annotations

import pytest
from django.db import connection

from retrieval.search import heavy_people

pytestmark = pytest.mark.django_db

MODES = ("none", "keyword", "semantic", "both")


def write(client, text, participant):
    response = client.post("/v1/facts", {"type": "acme.note", "content": {"text": text}, "scope": {"participantId": participant}}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def retrieve(client, participant, mode, query="washing machine leaks", **intent):
    body = {"query": query, "participantId": participant, "intents": [{"scope": "same-user", "mode": mode, **intent}]}
    response = client.post("/v1/retrieve", body, format="json")
    assert response.status_code == 200, response.content
    return [(h["fact"]["id"], h["ranks"], h["score"]) for h in response.json()["facts"]]


def prepared_statements() -> list[tuple[str, int, int]]:
    """This connection's prepared retrieval statements: (text, generic plans, custom plans)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE %s", ["%facts_fact f%"])
        return cursor.fetchall()


@pytest.fixture
def people(world, local_model):
    client = world.client()
    texts = ["The washing machine leaks water onto the floor.", "The dishwasher drips a little.",
             "Our office opens at 9am.", "The customer ordered a blue sofa.", "washing machine leaks again, call the plumber"]
    mine = [write(client, text, "end-1") for text in texts]
    theirs = [write(client, text, "end-2") for text in texts]  # identical text and embeddings, another person
    heavy_people.clear()
    yield client, mine, theirs
    heavy_people.clear()


def key(world, participant):
    return (world.acme.id, world.desk.id, participant)


def test_reads_are_prepared_and_answer_as_planned_ones_do(people, settings):
    client, mine, theirs = people
    settings.MEMORYHUB_PREPARED_BELOW = 0
    planned = {mode: retrieve(client, "end-1", mode) for mode in MODES}  # planned each time
    assert prepared_statements() == []
    assert all(planned[mode] for mode in MODES)
    settings.MEMORYHUB_PREPARED_BELOW = 500
    # Past PostgreSQL's five custom plans, so the generic plan answers too; end-2 alternates
    # with end-1 through the same prepared statements and sees only their own facts.
    for _ in range(7):
        for mode in MODES:
            assert retrieve(client, "end-1", mode) == planned[mode], mode
            assert {fact for fact, _, _ in retrieve(client, "end-2", mode)} <= set(theirs), mode
    statements = prepared_statements()
    assert len(statements) == len(MODES)
    assert all(generic > 0 for _, generic, _ in statements)


def test_a_person_with_many_facts_is_learned_and_then_planned_each_time(people, settings, world, django_assert_num_queries):
    client, mine, theirs = people
    settings.MEMORYHUB_PREPARED_BELOW = 5  # end-1 holds 5: not fewer
    assert {fact for fact, _, _ in retrieve(client, "end-1", "both")} == set(mine)  # prepared: not known yet
    assert len(prepared_statements()) == 1 and key(world, "end-1") in heavy_people
    for _ in range(3):
        with django_assert_num_queries(2) as planned:  # the key (read on every request), the statement
            assert {fact for fact, _, _ in retrieve(client, "end-1", "both")} == set(mine)
        assert "participant_size" not in planned.captured_queries[-1]["sql"]  # nothing counted
    assert prepared_statements()[0][1:] == (0, 1)  # run once, never since
    retrieve(client, "end-2", "both")
    assert key(world, "end-2") in heavy_people
    settings.MEMORYHUB_PREPARED_BELOW = 6  # end-1's 5 are few again; known as heavy until the TTL runs out
    settings.MEMORYHUB_PARTICIPANT_SIZE_TTL = 0
    heavy_people.clear()
    retrieve(client, "end-1", "keyword")  # prepared, counted again: light now
    assert key(world, "end-1") not in heavy_people
    retrieve(client, "end-2", "keyword")
    assert key(world, "end-2") not in heavy_people


def test_a_read_that_finds_nothing_still_learns_the_size(people, settings, world):
    client, mine, theirs = people
    settings.MEMORYHUB_PREPARED_BELOW = 3
    assert retrieve(client, "end-1", "keyword", query="zebra") == []
    assert key(world, "end-1") in heavy_people


def test_off_means_never_prepared_and_nothing_counted(people, settings, django_assert_num_queries):
    client, mine, theirs = people
    settings.MEMORYHUB_PREPARED_BELOW = 0
    retrieve(client, "end-1", "both")
    with django_assert_num_queries(2) as captured:  # the key and its role (one statement), then the read
        assert {fact for fact, _, _ in retrieve(client, "end-1", "both")} == set(mine)
    assert "participant_size" not in captured.captured_queries[-1]["sql"]
    assert prepared_statements() == []


def test_one_statement_per_intent_prepared_or_planned(people, settings, world, django_assert_num_queries):
    client, mine, theirs = people
    settings.MEMORYHUB_PREPARED_BELOW = 500
    retrieve(client, "end-2", "keyword")
    before = len(prepared_statements())
    with django_assert_num_queries(2):  # the key and its role, then one statement for the intent
        retrieve(client, "end-1", "both", match="any", fusion="score")
    assert len(prepared_statements()) == before + 1
    heavy_people.add(key(world, "end-1"), 60)
    with django_assert_num_queries(2):
        retrieve(client, "end-1", "both", match="any", fusion="score")


def test_heavy_people_forget_the_oldest_and_expire():
    from retrieval.search import _HeavyPeople

    people = _HeavyPeople(max_entries=2)
    people.add(("t", "p", "a"), 60)
    people.add(("t", "p", "b"), 60)
    people.add(("t", "p", "c"), 60)
    assert ("t", "p", "a") not in people and ("t", "p", "b") in people and ("t", "p", "c") in people
    people.add(("t", "p", "d"), -1)
    assert ("t", "p", "d") not in people
