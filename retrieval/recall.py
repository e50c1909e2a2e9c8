"""Recall: what people said in an agent's earlier conversations, for a conversations intent.

Each intent is one SQL statement, built from the same legs as fact retrieval
(retrieval.search: keyword websearch + ts_rank_cd or match=any BM25, semantic pgvector,
RRF k = 60 or fusion=score) over messages joined to their conversations. Every condition
— tenant, the run's project, the agent, the scope, roles, replays, unregistered
conversations, the history window and the participant guard — is in the WHERE clause of
every leg, and the neighbours either side of a hit are read in the same statement under
the same message conditions. So a ranked list never holds a message the run may not
recall. `neighbours: w` (off by default) lifts a message by w x the scores of the candidates
next to it (w/2 two messages away), brings those messages in as candidates, and has the
semantic leg read each message together with the messages either side.

The guard: a message is recallable only by its person (the run's participant is the
conversation's), from inside its conversation, or by a key that acts for the whole
project (write access, bound to no participant). A participant-bound key recalls only
its participant's conversations; a read key only conversations kept for no participant.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection

from accounts.services import Principal
from core import policy
from core.api import iso_time
from retrieval.embeddings import Embedder, get_embedder
from retrieval.search import Intent, Result, Run, bm25_stats, fused_ctes, intent_params, search_mode

AGENT_NOTE = "earlier answer by the agent, not verified"
MESSAGES_TABLE = "retrieval_message f JOIN retrieval_conversation c ON c.id = f.conversation_id"
DEFAULT_HISTORY_WINDOW = 20


def history_window() -> int:
    """How many of a conversation's latest messages the model sees as turns (never recalled)."""
    return max(0, int(getattr(settings, "MEMORYHUB_RECALL_HISTORY_WINDOW", DEFAULT_HISTORY_WINDOW)))


@dataclass
class Neighbour:
    role: str
    text: str
    sequence: int
    created_at: datetime
    external_id: str | None


@dataclass
class Recalled:
    """One recalled message with its ranks and the messages either side of it."""

    message_id: int
    role: str
    text: str
    sequence: int
    created_at: datetime
    external_id: str | None
    user_id: int
    project_id: Any
    conversation_id: Any
    participant_id: str | None
    agent_slug: str
    conversation_created_at: datetime
    ranks: dict[str, int]
    score: float
    intent: Intent
    another_person: bool
    before: Neighbour | None = None
    after: Neighbour | None = None


def _escape_like(value: str) -> str:
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _conditions(run: Run, intent: Intent, params: dict) -> tuple[list[str], list[str]] | None:
    """(conversation-and-message conditions for hits, message conditions for neighbours); None: recalls nothing."""
    principal: Principal = run.principal
    if run.project_id is None or not run.agent_slug:
        return None
    params.update(tenant=principal.tenant_id, project=run.project_id, agent=run.agent_slug, roles=list(intent.roles))
    conds = [
        "f.tenant_id = %(tenant)s",
        "c.tenant_id = %(tenant)s",
        "c.project_id = %(project)s",
        "c.agent_slug = %(agent)s",
        "c.replay = false",  # a replay's answers are no one's
        "c.unregistered_at IS NULL",
        "f.role = ANY(%(roles)s)",  # never tool messages: roles are user and/or agent
    ]
    if principal.project_id is not None:
        params["key_project"] = principal.project_id
        conds.append("c.project_id = %(key_project)s")
    message_conds = ["n.role = ANY(%(roles)s)"]
    if run.conversation_id is not None:
        params["conversation"] = run.conversation_id
    if intent.scope == "same-user":
        if run.participant_id is None:
            return None
        params["participant"] = run.participant_id
        conds.append("c.participant_id = %(participant)s")  # never the conversations kept for no participant
        if run.conversation_id is not None:
            conds.append("c.id <> %(conversation)s")
    elif intent.scope == "same-conversation":
        if run.conversation_id is None:
            return None
        params["window"] = history_window()
        cutoff = "(SELECT w.next_sequence FROM retrieval_conversation w WHERE w.id = %(conversation)s) - %(window)s"
        conds += ["c.id = %(conversation)s", f"f.sequence < {cutoff}"]
        message_conds.append(f"n.sequence < {cutoff}")
    elif intent.scope == "same-segment":
        if not run.segment:
            return None
        params["segment"] = run.segment
        params["segment_prefix"] = _escape_like(run.segment) + "/%"
        conds.append("(c.segment = %(segment)s OR c.segment LIKE %(segment_prefix)s)")
        if run.conversation_id is not None:
            conds.append("c.id <> %(conversation)s")
    else:  # same-project
        if run.conversation_id is not None:
            conds.append("c.id <> %(conversation)s")
    # The guard, whatever the scope.
    visible = policy.participant_sql(principal, "c.participant_id", params, unattributed=True)
    if visible != "TRUE":
        conds.append(visible)
    return conds, message_conds


_QUOTED = "n.role, n.text, n.sequence, n.created_at, n.external_id"  # what before/after quote of a neighbour
_SIDES = {"before": ("<", "DESC"), "after": (">", "ASC")}


def _nearest(side: str, where: str, columns: str = "n.id", limit: int = 1) -> str:
    """The `limit` messages nearest to message `f` on `side` (before, after) in its conversation
    that `where` allows (on alias n), nearest first: what a message's neighbours are."""
    op, order = _SIDES[side]
    return f"""SELECT {columns} FROM retrieval_message n
        WHERE n.conversation_id = f.conversation_id AND n.sequence {op} f.sequence AND {where}
        ORDER BY n.sequence {order} LIMIT {limit}"""


def _beside(side: str, alias: str, where: str, columns: str) -> str:
    """`LEFT JOIN LATERAL` of f's nearest message on `side`, as `alias` (NULLs when none)."""
    return f"""
    LEFT JOIN LATERAL ({_nearest(side, where, columns)}) {alias} ON true"""


# `neighbours: w`: a message's score gains w x the fused score of each candidate of the legs
# next to it, and w/2 x that of each candidate two messages away (neighbours as quoted in
# before/after: the messages either side the intent may recall), and those messages become
# candidates themselves (own score 0, no ranks): in a conversation the answer is often the
# message after the one that matches the question, or the one after that. Two index range
# reads (at most two rows each) per candidate of the legs, so the cost is bounded by their depth.
def _reach(side: str, where: str) -> str:
    """The two messages nearest to f on `side`, each with its reach: 1 next to f, 0.5 two away."""
    order = _SIDES[side][1]
    return f"""
            (SELECT id, CASE WHEN place = 1 THEN 1.0 ELSE 0.5 END AS reach FROM (
                SELECT n.id, row_number() OVER (ORDER BY n.sequence {order}) AS place
                FROM ({_nearest(side, where, "n.id, n.sequence", limit=2)}) n
            ) placed)"""


def _neighbour_ctes(neighbour_where: str) -> str:
    """`scored (id, kr, sr, score)`: `fused` with each message lifted by the candidates near it."""
    before, after = _reach("before", neighbour_where), _reach("after", neighbour_where)
    return f""",
    beside AS MATERIALIZED (
        SELECT x.id, fu.score * x.reach AS lift
        FROM fused fu JOIN retrieval_message f ON f.id = fu.id
        CROSS JOIN LATERAL ({before}
            UNION ALL{after}
        ) x
    ),
    near AS (SELECT id, sum(lift) AS score FROM beside GROUP BY id),
    scored AS (
        SELECT COALESCE(fu.id, nr.id) AS id, fu.kr, fu.sr,
               (COALESCE(fu.score, 0) + %(neighbours)s * COALESCE(nr.score, 0))::float8 AS score
        FROM fused fu FULL OUTER JOIN near nr ON nr.id = fu.id
    )"""


# `neighbours: w` also reads each message together with the messages either side for the
# semantic leg: its similarity to the question is that of the window v + w (before + after)
# (each vector unit length), ranked over the leg's nearest messages and their neighbours. A
# question often matches a turn only with its context ("Did you go?" / "Yes, on Sunday").
# From cosines alone, so no vector is written for it:
#   sim = (c + w cb + w ca) / |v + w vb + w va|,
#   |..|^2 = 1 + w^2 [b] + w^2 [a] + 2w cos(v, vb) + 2w cos(v, va) + 2w^2 cos(vb, va),
# where c, cb, ca are the cosines to the question, and a neighbour without an embedding of the
# model counts as absent.
def _window_semantic(where: str, neighbour_where: str) -> str:
    embedded = "n.embedding_model = %(model)s AND n.embedding IS NOT NULL"
    side = neighbour_where + " AND " + embedded
    return f"""
    sem_near AS MATERIALIZED (
        SELECT f.id, f.conversation_id, f.sequence FROM {MESSAGES_TABLE}
        WHERE {where} AND f.embedding_model = %(model)s AND f.embedding IS NOT NULL
        ORDER BY f.embedding <=> %(vector)s::vector
        LIMIT %(sem_depth)s
    ),
    sem_pool AS MATERIALIZED (
        SELECT id FROM sem_near
        UNION
        SELECT x.id FROM sem_near f, LATERAL (({_nearest("before", side)}) UNION ALL ({_nearest("after", side)})) x
    ),
    sem_window AS MATERIALIZED (
        SELECT p.id,
               1 - (f.embedding <=> %(vector)s::vector) AS c,
               CASE WHEN b.id IS NULL THEN 0 ELSE 1 - (b.embedding <=> %(vector)s::vector) END AS cb,
               CASE WHEN a.id IS NULL THEN 0 ELSE 1 - (a.embedding <=> %(vector)s::vector) END AS ca,
               CASE WHEN b.id IS NULL THEN 0 ELSE 1 END AS hb,
               CASE WHEN a.id IS NULL THEN 0 ELSE 1 END AS ha,
               CASE WHEN b.id IS NULL THEN 0 ELSE 1 - (f.embedding <=> b.embedding) END AS vb,
               CASE WHEN a.id IS NULL THEN 0 ELSE 1 - (f.embedding <=> a.embedding) END AS va,
               CASE WHEN a.id IS NULL OR b.id IS NULL THEN 0 ELSE 1 - (b.embedding <=> a.embedding) END AS ba
        FROM sem_pool p JOIN retrieval_message f ON f.id = p.id
        {_beside("before", "b", side, "n.id, n.embedding")}
        {_beside("after", "a", side, "n.id, n.embedding")}
    ),
    sem AS MATERIALIZED (
        SELECT id, (1 - (c + %(neighbours)s * (cb + ca)) / sqrt(GREATEST(
                   1 + %(neighbours)s ^ 2 * (hb + ha) + 2 * %(neighbours)s * (vb + va) + 2 * %(neighbours)s ^ 2 * ba, 1e-9
               )))::float8 AS distance
        FROM sem_window
        ORDER BY distance, id
        LIMIT %(sem_depth)s
    ),"""


def _sql(mode: str, where: str, neighbour_where: str, match: str, fusion: str, given_stats: bool = False, neighbours: bool = False) -> str:
    if mode == "none":
        ctes = f"""WITH fused AS (
            SELECT f.id, NULL::bigint AS kr, NULL::bigint AS sr, 0::float8 AS score
            FROM {MESSAGES_TABLE} WHERE {where}
            ORDER BY f.created_at DESC, f.id DESC LIMIT %(limit)s
        )"""
        order = "f.created_at DESC, f.id DESC"
    else:
        window = _window_semantic(where, neighbour_where) if neighbours and mode in ("semantic", "both") else None
        ctes = fused_ctes(mode, where, match, fusion, MESSAGES_TABLE, given_stats=given_stats, semantic_window=window)
        if neighbours:
            ctes += _neighbour_ctes(neighbour_where)
        order = "fused.score DESC, LEAST(COALESCE(fused.kr, 1000000), COALESCE(fused.sr, 1000000)), f.id"
    scored = "scored AS fused" if neighbours and mode != "none" else "fused"
    return f"""
    {ctes}
    SELECT f.id, f.role, f.text, f.sequence, f.created_at, f.external_id, f.user_id, f.project_id, f.conversation_id,
           c.participant_id, c.agent_slug, c.created_at, fused.kr, fused.sr, fused.score,
           b.role, b.text, b.sequence, b.created_at, b.external_id,
           a.role, a.text, a.sequence, a.created_at, a.external_id
    FROM {scored} JOIN retrieval_message f ON f.id = fused.id JOIN retrieval_conversation c ON c.id = f.conversation_id
    {_beside("before", "b", neighbour_where, _QUOTED)}
    {_beside("after", "a", neighbour_where, _QUOTED)}
    ORDER BY {order}
    LIMIT %(limit)s"""


def _neighbour(values: tuple) -> Neighbour | None:
    if values[0] is None:
        return None
    return Neighbour(role=values[0], text=values[1], sequence=values[2], created_at=values[3], external_id=values[4])


def recall_intent(run: Run, intent: Intent, result: Result, *, embedder: Embedder | None = None, vector_cache: dict | None = None) -> list[Recalled]:
    """Messages recalled for one conversations intent, ranked; adds warnings to `result`."""
    params = intent_params(run, intent, result)
    if params is None:
        return []
    built = _conditions(run, intent, params)
    if built is None:
        return []
    conds, message_conds = built
    mode = search_mode(run, intent, result, params, embedder=embedder, vector_cache=vector_cache)
    where = " AND ".join(conds)
    given_stats = bm25_stats(intent, mode, where, params, MESSAGES_TABLE)
    neighbours = bool(intent.neighbours) and mode != "none"
    if neighbours:
        params["neighbours"] = intent.neighbours
    sql = _sql(mode, where, " AND ".join(message_conds), intent.match, intent.fusion, given_stats, neighbours)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    hits = []
    for row in rows:
        (message_id, role, text, sequence, created_at, external_id, user_id, project_id, conversation_id,
         participant_id, agent_slug, conversation_created_at, kr, sr, score) = row[:15]
        ranks = {}
        if kr is not None:
            ranks["keyword"] = int(kr)
        if sr is not None:
            ranks["semantic"] = int(sr)
        own_conversation = run.conversation_id is not None and str(conversation_id) == str(run.conversation_id)
        own_person = run.participant_id is not None and participant_id == run.participant_id
        hits.append(Recalled(
            message_id=message_id, role=role, text=text, sequence=sequence, created_at=created_at, external_id=external_id,
            user_id=user_id, project_id=project_id, conversation_id=conversation_id, participant_id=participant_id,
            agent_slug=agent_slug, conversation_created_at=conversation_created_at, ranks=ranks, score=float(score),
            intent=intent, another_person=not (own_conversation or own_person),
            before=_neighbour(row[15:20]), after=_neighbour(row[20:25]),
        ))
    return hits


def recall(*, run: Run, intents: list[Intent], result: Result | None = None) -> Result:
    """Run each conversations intent into `result.recalled`; a message found by several is reported once."""
    result = result if result is not None else Result()
    if not intents:
        return result
    embedder = get_embedder() if any(i.mode in ("semantic", "both") for i in intents) else None
    vectors: dict[str, str] = {}  # query -> its embedding, as SQL takes it
    seen = {hit.message_id for hit in result.recalled}
    for intent in intents:
        for hit in recall_intent(run, intent, result, embedder=embedder, vector_cache=vectors):
            if hit.message_id in seen:
                continue
            seen.add(hit.message_id)
            result.recalled.append(hit)
    return result


# --- shapes --------------------------------------------------------------------------------------


def _neighbour_dict(neighbour: Neighbour) -> dict:
    body: dict[str, Any] = {"role": neighbour.role, "text": neighbour.text, "sequence": neighbour.sequence, "createdAt": iso_time(neighbour.created_at)}
    if neighbour.external_id is not None:
        body["externalId"] = neighbour.external_id
    if neighbour.role == "agent":
        body["note"] = AGENT_NOTE
    return body


def recalled_to_dict(hit: Recalled) -> dict:
    """A recalled hit as the API returns it (seed 003's `recalled`). Another person's message
    carries `anotherPerson: true` and no participantId: it does not say whose it is."""
    message: dict[str, Any] = {
        "role": hit.role, "text": hit.text, "userId": str(hit.user_id), "agentId": hit.agent_slug, "sequence": hit.sequence,
        "createdAt": iso_time(hit.created_at), "projectId": str(hit.project_id),
        "participantId": None if hit.another_person else hit.participant_id, "conversationId": str(hit.conversation_id),
    }
    if hit.external_id is not None:
        message["externalId"] = hit.external_id
    body: dict[str, Any] = {"ranks": hit.ranks, "score": hit.score, "intent": hit.intent.as_dict(), "message": message}
    if hit.before is not None:
        body["before"] = _neighbour_dict(hit.before)
    if hit.after is not None:
        body["after"] = _neighbour_dict(hit.after)
    if hit.role == "agent":
        body["note"] = AGENT_NOTE
    if hit.another_person:
        body["anotherPerson"] = True
    return body


def _quote(role: str, text: str) -> dict:
    body = {"role": role, "text": text}
    if role == "agent":
        body["note"] = AGENT_NOTE
    return body


def memory_entry(hit: Recalled) -> dict:
    """A recalled message as the `<memory>` block quotes it: the conversation's date, the message, its neighbours."""
    entry: dict[str, Any] = {
        "earlierConversation": hit.conversation_created_at.date().isoformat(),
        "message": {"role": hit.role, "text": hit.text},
    }
    if hit.before is not None:
        entry["before"] = _quote(hit.before.role, hit.before.text)
    if hit.after is not None:
        entry["after"] = _quote(hit.after.role, hit.after.text)
    if hit.role == "agent":
        entry["note"] = AGENT_NOTE
    if hit.another_person:
        entry["anotherPerson"] = True
    return entry
