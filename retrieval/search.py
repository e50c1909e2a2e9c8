"""Retrieval of facts: keyword, semantic and hybrid (RRF, k = 60) search, and newest-first.

Two intent options change how a search's legs are made and combined; their defaults keep
the behaviour above (docs/benchmarks.md has the measurements behind them):

- `match` (modes keyword, both): `all` (default): the query in web-search syntax, every word
  must occur (`"phrases"`, `or`, `-word`), ranked by `ts_rank_cd`. `any`: a fact matches if
  it has any of the query's words (stemmed, stop words dropped by the search config),
  ranked by BM25 (k1 1.2, b 0.75; document frequencies and lengths counted over the facts
  the intent may read), which suits a question asked in natural language.
- `fusion` (mode both): `rrf` (default): score = sum of 1 / (60 + rank) over the legs.
  `score`: each leg's scores are min-max normalised over its candidates (keyword: its rank
  value; semantic: cosine similarity) and averaged, so a leg counts by how far a fact is
  ahead of the others there, not only by its place. `keywordWeight` (default 0.5) is the
  keyword leg's share of that average, the semantic leg's the rest.

Trust (`TRUST_ORDER`): at equal relevance a fact a person verified comes before an asserted
one, and that before an agent's unverified guess. It is a tie-break, not a boost: within a
leg, candidates of equal relevance (equal rank value or distance) take their places by trust
before id (`_ranked`), and the final ORDER BY puts trust after the score (in mode none, where
every score is 0, before recency). No score
changes: a keyword-only rank-1 hit still scores exactly 1/61. `minTrust` (an intent option:
unverified, asserted, verified) keeps only facts of at least that trust, in the WHERE clause.

Each intent is one SQL statement (one round trip). Scope and visibility — tenant,
project, participant, conversation, status, expiry, validity, types, embedding model —
are conditions in the WHERE clause of every leg, so a ranked list can never contain a
row the caller may not see and then drop it afterwards.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.models import DEFERRED

from accounts.selectors import project_search_config
from accounts.services import Principal
from core import connections
from core.errors import ValidationFailed
from facts import visibility
from facts.content import LAYOUT_TYPE
from facts.models import Fact
from retrieval.embeddings import Embedder, get_embedder, query_vector_literal
from retrieval.rerank import RERANK_DEPTH, get_reranker, rerank_hits

RRF_K = 60
MODES = ("none", "keyword", "semantic", "both")
MATCHES = ("all", "any")  # keyword leg: every word (web-search syntax) or any word (BM25)
FUSIONS = ("rrf", "score")  # mode both: reciprocal rank fusion or mean of min-max normalised scores
BM25_K1, BM25_B = 1.2, 0.75
DEFAULT_KEYWORD_WEIGHT = 0.5  # fusion score: the keyword leg's share (intent option keywordWeight)
FACT_SCOPES = ("same-conversation", "same-user", "same-project", "tenant")
RECALL_SCOPES = ("same-user", "same-conversation", "same-segment", "same-project")
RECALL_ROLES = ("user", "agent")
DEFAULT_ROLES = ("user",)
DEFAULT_LIMIT = 10
MAX_LIMIT = 100
MIN_DEPTH = 40  # candidates per leg: at least 4 x limit, and never fewer than this
RERANK_BY_DEFAULT: tuple[str, ...] = ()  # the modes whose facts intents rerank unless they say `rerank: false`

# Trust levels, lowest first (`minTrust`), and the SQL that orders a fact's trust, highest first.
TRUST_LEVELS = ("unverified", "asserted", "verified")
def trust_order(alias: str = "f") -> str:
    """SQL ordering a fact's trust, highest first."""
    return f"CASE {alias}.trust WHEN 'verified' THEN 0 WHEN 'asserted' THEN 1 ELSE 2 END"


TRUST_ORDER = trust_order()

NEEDS_PARTICIPANT = (
    "{who} keeps memory per end user, but this run names none (`participantId`), so it read and kept none. "
    "Pass the person's `participantId` on each run: the user a credential acts for may serve many people."
)


@dataclass(frozen=True)
class Intent:
    scope: str
    mode: str = "none"
    limit: int = DEFAULT_LIMIT
    types: tuple[str, ...] = ()
    source: str = "facts"
    match: str = "all"
    fusion: str = "rrf"
    roles: tuple[str, ...] = ()  # conversations: the roles recalled (default: users' messages only)
    rerank: bool = False  # facts, a searching mode: the fused candidates reordered by retrieval.rerank
    min_trust: str | None = None  # facts: only facts of at least this trust (TRUST_LEVELS)
    neighbours: float = 0.0  # conversations, a searching mode: messages read with those beside them (retrieval.recall)
    keyword_weight: float = DEFAULT_KEYWORD_WEIGHT  # mode both, fusion score: the keyword leg's share of the score

    def as_dict(self) -> dict:
        body: dict[str, Any] = {"source": self.source, "scope": self.scope, "mode": self.mode, "limit": self.limit}
        if self.source == "conversations" and self.roles != DEFAULT_ROLES:
            body["roles"] = list(self.roles)
        if self.match != "all":
            body["match"] = self.match
        if self.fusion != "rrf":
            body["fusion"] = self.fusion
        if self.rerank != default_rerank(self.source, self.mode):
            body["rerank"] = self.rerank
        if self.types:
            body["types"] = list(self.types)
        if self.min_trust:
            body["minTrust"] = self.min_trust
        if self.neighbours:
            body["neighbours"] = self.neighbours
        if self.keyword_weight != DEFAULT_KEYWORD_WEIGHT:
            body["keywordWeight"] = self.keyword_weight
        return body


@dataclass
class Run:
    """What one retrieval is for: the caller, the message, the person and the conversation."""

    principal: Principal
    query: str
    participant_id: str | None = None
    conversation_id: str | None = None
    project_id: Any = None
    who: str = "This retrieval"
    agent_slug: str | None = None  # recall: whose conversations (always one agent's)
    segment: str | None = None  # recall: the run's segment path (from its conversation or the call)


@dataclass
class Hit:
    fact: Fact
    ranks: dict[str, int]
    score: float
    intent: Intent


@dataclass
class Result:
    hits: list[Hit] = field(default_factory=list)
    recalled: list = field(default_factory=list)  # retrieval.recall.Recalled, for conversations intents
    warnings: list[dict] = field(default_factory=list)

    def warn(self, code: str, message: str) -> None:
        if not any(w["code"] == code and w["message"] == message for w in self.warnings):
            self.warnings.append({"code": code, "message": message})


def parse_intent(raw: Any, index: int = 0) -> Intent:
    """Validate one intent as the API and agents give it."""
    where = f"intents[{index}]"
    if not isinstance(raw, dict):
        raise ValidationFailed(f"{where} must be an object", errors={where: ["must be an object"]})
    known = {"source", "types", "scope", "mode", "limit", "roles", "match", "fusion", "rerank", "minTrust", "neighbours", "keywordWeight"}
    if unknown := sorted(set(raw) - known):
        raise ValidationFailed(f"{where}.{unknown[0]} is not an intent field", errors={f"{where}.{name}": ["unknown field"] for name in unknown})
    source = raw.get("source", "facts")
    if source not in ("facts", "conversations"):
        raise ValidationFailed(f"{where}.source must be \"facts\" or \"conversations\"", errors={f"{where}.source": ["facts or conversations"]})
    scopes = FACT_SCOPES if source == "facts" else RECALL_SCOPES
    scope = raw.get("scope")
    if scope not in scopes:
        raise ValidationFailed(f"{where}.scope must be one of {', '.join(scopes)}", errors={f"{where}.scope": [f"one of {', '.join(scopes)}"]})
    mode = raw.get("mode", "none")
    if mode not in MODES:
        raise ValidationFailed(f"{where}.mode must be one of {', '.join(MODES)}", errors={f"{where}.mode": [f"one of {', '.join(MODES)}"]})
    limit = raw.get("limit", DEFAULT_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValidationFailed(f"{where}.limit must be a whole number from 1 to {MAX_LIMIT}", errors={f"{where}.limit": [f"1 to {MAX_LIMIT}"]})
    types = raw.get("types")
    if types is not None and source == "conversations":
        raise ValidationFailed(f"{where}.types is for source \"facts\": recall takes no types", errors={f"{where}.types": ["only for facts"]})
    if types is not None:
        if not isinstance(types, list) or not types or not all(isinstance(t, str) and t for t in types) or len(types) > 50:
            raise ValidationFailed(f"{where}.types must be a list of 1 to 50 fact types", errors={f"{where}.types": ["1 to 50 fact types"]})
    roles: tuple[str, ...] = ()
    if source == "facts" and "roles" in raw:
        raise ValidationFailed(f"{where}.roles is for source \"conversations\"", errors={f"{where}.roles": ["only for conversations"]})
    if source == "conversations":
        raw_roles = raw.get("roles", list(DEFAULT_ROLES))
        if not isinstance(raw_roles, list) or not raw_roles or any(role not in RECALL_ROLES for role in raw_roles):
            raise ValidationFailed(f"{where}.roles must be a list of user and/or agent", errors={f"{where}.roles": ["user and/or agent"]})
        roles = tuple(role for role in RECALL_ROLES if role in raw_roles)
    match = raw.get("match", "all")
    if match not in MATCHES:
        raise ValidationFailed(f"{where}.match must be one of {', '.join(MATCHES)}", errors={f"{where}.match": [f"one of {', '.join(MATCHES)}"]})
    if "match" in raw and mode not in ("keyword", "both"):
        raise ValidationFailed(f"{where}.match is for mode keyword or both", errors={f"{where}.match": ["only for mode keyword or both"]})
    fusion = raw.get("fusion", "rrf")
    if fusion not in FUSIONS:
        raise ValidationFailed(f"{where}.fusion must be one of {', '.join(FUSIONS)}", errors={f"{where}.fusion": [f"one of {', '.join(FUSIONS)}"]})
    if "fusion" in raw and mode != "both":
        raise ValidationFailed(f"{where}.fusion is for mode both", errors={f"{where}.fusion": ["only for mode both"]})
    rerank = raw.get("rerank", default_rerank(source, mode))
    if not isinstance(rerank, bool):
        raise ValidationFailed(f"{where}.rerank must be true or false", errors={f"{where}.rerank": ["true or false"]})
    if rerank and (source != "facts" or mode == "none"):
        raise ValidationFailed(
            f"{where}.rerank is for source \"facts\" in mode keyword, semantic or both",
            errors={f"{where}.rerank": ["only for facts searched by keyword, semantic or both"]},
        )
    min_trust = raw.get("minTrust")
    if min_trust is not None and source != "facts":
        raise ValidationFailed(f"{where}.minTrust is for source \"facts\"", errors={f"{where}.minTrust": ["only for facts"]})
    if min_trust is not None and min_trust not in TRUST_LEVELS:
        raise ValidationFailed(f"{where}.minTrust must be one of {', '.join(TRUST_LEVELS)}", errors={f"{where}.minTrust": [f"one of {', '.join(TRUST_LEVELS)}"]})
    neighbours = raw.get("neighbours", 0)
    if isinstance(neighbours, bool) or not isinstance(neighbours, (int, float)) or not 0 <= neighbours <= 1:
        raise ValidationFailed(f"{where}.neighbours must be a number from 0 to 1", errors={f"{where}.neighbours": ["0 to 1"]})
    if neighbours and (source != "conversations" or mode == "none"):
        raise ValidationFailed(
            f"{where}.neighbours is for source \"conversations\" in mode keyword, semantic or both: facts have no neighbours",
            errors={f"{where}.neighbours": ["only for conversations searched by keyword, semantic or both"]},
        )
    keyword_weight = raw.get("keywordWeight", DEFAULT_KEYWORD_WEIGHT)
    if isinstance(keyword_weight, bool) or not isinstance(keyword_weight, (int, float)) or not 0 <= keyword_weight <= 1:
        raise ValidationFailed(f"{where}.keywordWeight must be a number from 0 to 1", errors={f"{where}.keywordWeight": ["0 to 1"]})
    if "keywordWeight" in raw and (mode != "both" or fusion != "score"):
        raise ValidationFailed(
            f"{where}.keywordWeight is for mode both with fusion score: RRF counts places, not scores",
            errors={f"{where}.keywordWeight": ["only for mode both with fusion score"]},
        )
    return Intent(
        scope=scope, mode=mode, limit=limit, types=tuple(types or ()), source=source, match=match, fusion=fusion,
        roles=roles, rerank=rerank, min_trust=min_trust, neighbours=float(neighbours), keyword_weight=float(keyword_weight),
    )

def default_rerank(source: str, mode: str) -> bool:
    """Whether an intent that does not say reranks: facts searched by RERANK_BY_DEFAULT's modes."""
    return source == "facts" and mode in RERANK_BY_DEFAULT


# --- SQL ---------------------------------------------------------------------------------------

_FACT_COLUMNS = [f.column for f in Fact._meta.concrete_fields if f.column not in {"embedding", "search_vector"}]
_SELECT_FACT = ", ".join(f"f.{column}" for column in _FACT_COLUMNS)
_ID_PLACE = _FACT_COLUMNS.index("id")


def _conditions(run: Run, intent: Intent, params: dict) -> list[str] | None:
    """WHERE conditions for the intent's scope and the caller's visibility; None: reads nothing."""
    # What the key may read at all (facts.visibility: tenant, project, live, whose), then the intent's scope.
    conds = visibility.read_sql(run.principal, params)
    # A Markdown folder's layout (headings, order) is structure, not something remembered.
    conds.append(f"f.type <> '{LAYOUT_TYPE}'")
    if intent.types:
        params["types"] = list(intent.types)
        conds.append("f.type = ANY(%(types)s)")
    if intent.min_trust:
        params["trusts"] = list(TRUST_LEVELS[TRUST_LEVELS.index(intent.min_trust):])
        conds.append("f.trust = ANY(%(trusts)s)")
    if run.participant_id is not None:
        params["participant"] = run.participant_id
    if run.conversation_id is not None:
        params["conversation"] = run.conversation_id
    if run.project_id is not None:
        params["project"] = run.project_id

    if intent.scope == "same-user":
        if run.participant_id is None or run.project_id is None:
            return None
        conds += [
            "f.project_id = %(project)s",
            "f.participant_id = %(participant)s",
            "(f.conversation_id IS NULL" + (" OR f.conversation_id = %(conversation)s)" if run.conversation_id else ")"),
        ]
    elif intent.scope == "same-conversation":
        if run.conversation_id is None or run.project_id is None:
            return None
        conds += ["f.project_id = %(project)s", "f.conversation_id = %(conversation)s"]
        if run.participant_id is not None:
            conds.append("(f.participant_id IS NULL OR f.participant_id = %(participant)s)")
        else:
            conds.append("f.participant_id IS NULL")
    elif intent.scope == "same-project":
        if run.project_id is None:
            return None
        conds += ["f.project_id = %(project)s", "f.participant_id IS NULL", "f.conversation_id IS NULL"]
    else:  # tenant: what is kept for no one in particular, across what the key may see
        conds += ["f.participant_id IS NULL", "f.conversation_id IS NULL"]
    return conds


FACTS_TABLE = "facts_fact f"


def _keyword_leg(where: str, match: str = "all", normalise: bool = False, table: str = FACTS_TABLE, given_stats: bool = False) -> str:
    if match == "any":
        return _bm25_leg(where, table, given_stats) + _ranked("kw", "rank_value DESC", "rank_value", normalise, table)
    # match all: every word first (web-search syntax, ts_rank_cd); then, when those do not
    # fill the candidates, the facts sharing any of the query's words, by BM25 (`kw_bm25`,
    # the `match: any` leg), never one with a word the query excludes (`-word`). `tier`
    # keeps the two apart: 0 every word, 1 some words.
    widen = "(SELECT count(*) FROM kw_all) < %(depth)s AND NOT f.search_vector @@ (SELECT query FROM kw_not)"
    return f"""
    kw_all AS MATERIALIZED (
        SELECT f.id, ts_rank_cd(f.search_vector, q.query) AS rank_value
        FROM {table}, websearch_to_tsquery(%(config)s::regconfig, %(query)s) AS q(query)
        WHERE {where} AND f.search_vector @@ q.query
        ORDER BY rank_value DESC, f.id
        LIMIT %(depth)s
    ),
    kw_not AS MATERIALIZED ({_EXCLUDED_WORDS}),""" + _bm25_leg(where, table, given_stats, name="kw_bm25", gate=widen) + """
    kw AS MATERIALIZED (
        SELECT id, rank_value, tier FROM (
            SELECT id, rank_value, 0 AS tier FROM kw_all
            UNION ALL
            SELECT b.id, b.rank_value, 1 AS tier FROM kw_bm25 b WHERE NOT EXISTS (SELECT 1 FROM kw_all a WHERE a.id = b.id)
        ) AS both_tiers
        ORDER BY tier, rank_value DESC, id
        LIMIT %(depth)s
    ),""" + _ranked("kw", "tier, rank_value DESC", None, normalise, table)


# The words a web-search query excludes (`-word`: `!'lexeme'` in its tsquery) as one
# tsquery, 'a' | 'b' (empty: none). A negated phrase (`-"a b"`) excludes no single word.
_EXCLUDED_WORDS = r"""
        SELECT COALESCE(string_agg('''' || m[1] || '''', ' | '), '')::tsquery AS query
        FROM regexp_matches(websearch_to_tsquery(%(config)s::regconfig, %(query)s)::text, '!''((?:[^'']|'''')*)''', 'g') AS m"""


def _bm25_leg(where: str, table: str = FACTS_TABLE, given_stats: bool = False, name: str = "kw", gate: str = "true") -> str:
    """`name` (`kw` for match any): facts with any of the query's lexemes, by BM25 over the
    facts the intent may read; none unless the SQL condition `gate` holds (evaluated once).

    The collection statistics (row count, mean length) come from `%(bm25_n)s` and
    `%(bm25_avgdl)s` when `bm25_stats` has put them in the parameters (large scopes), else
    they are counted over the scope in the same statement.
    """
    # kw_query: 'a' | 'b' | ... from the query's lexemes, quotes and backslashes escaped for tsquery input.
    return f"""
    kw_terms AS MATERIALIZED (SELECT DISTINCT t.lexeme FROM unnest(to_tsvector(%(config)s::regconfig, %(query)s)) AS t),
    kw_query AS MATERIALIZED (
        SELECT COALESCE(string_agg('''' || replace(replace(lexeme, '\\', '\\\\'), '''', '''''') || '''', ' | '), '')::tsquery AS query
        FROM kw_terms
    ),
    kw_match AS MATERIALIZED (
        SELECT f.id, f.search_vector AS v FROM {table}, kw_query q WHERE ({gate}) AND {where} AND f.search_vector @@ q.query
    ),
    kw_stats AS MATERIALIZED ({{stats}}),
    kw_tf AS MATERIALIZED (
        SELECT m.id, t.lexeme, COALESCE(cardinality(t.positions), 1)::float8 AS tf, length(m.v)::float8 AS dl
        FROM kw_match m, unnest(m.v) AS t
        WHERE t.lexeme IN (SELECT lexeme FROM kw_terms)
    ),
    kw_df AS (SELECT lexeme, count(*)::float8 AS df FROM kw_tf GROUP BY lexeme),
    {name} AS MATERIALIZED (
        SELECT tf.id, sum(
            ln(1 + (s.n - d.df + 0.5) / (d.df + 0.5))
            * tf.tf * ({BM25_K1} + 1) / (tf.tf + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * tf.dl / GREATEST(s.avgdl, 1)))
        ) AS rank_value
        FROM kw_tf tf JOIN kw_df d USING (lexeme), kw_stats s
        GROUP BY tf.id
        ORDER BY rank_value DESC, tf.id
        LIMIT %(depth)s
    ),""".replace("{stats}", _BM25_GIVEN_STATS if given_stats else _bm25_stats_sql(where, table))


# BM25 statistics given as parameters, and counted in SQL.
_BM25_GIVEN_STATS = "SELECT %(bm25_n)s::float8 AS n, %(bm25_avgdl)s::float8 AS avgdl"


def _bm25_stats_sql(where: str, table: str) -> str:
    return f"SELECT count(*)::float8 AS n, COALESCE(avg(length(f.search_vector)), 1)::float8 AS avgdl FROM {table} WHERE {where}"


# Scopes whose BM25 statistics are cached: counting them means reading every fact kept for
# a whole project (20k rows at 100k facts: 17 of the 23 ms of a keyword read), while a
# person's or a conversation's few rows are counted in the statement itself at no cost.
BM25_CACHED_SCOPES = ("same-project", "tenant")


def bm25_stats(intent: Intent, mode: str, where: str, params: dict, table: str = FACTS_TABLE) -> bool:
    """Whether the intent's keyword leg takes its BM25 statistics as parameters (a keyword
    leg over a BM25_CACHED_SCOPES scope: `match: any`, and `all` when it widens); if so, puts them into `params` (`bm25_n`,
    `bm25_avgdl`), from the cache when they were counted in the last
    MEMORYHUB_BM25_STATS_TTL seconds, else counted now.

    The key is the scope (the WHERE clause and its parameters, not the query): the same
    people and projects share one entry. Stale by at most the TTL, which moves a score by
    the change in a project's mean fact length or size in that time: a rounding error.
    """
    if mode not in ("keyword", "both") or intent.scope not in BM25_CACHED_SCOPES:
        return False
    scope_params = {k: v for k, v in params.items() if k not in _QUERY_PARAMS}
    digest = hashlib.sha256(repr((table, where, sorted((k, str(v)) for k, v in scope_params.items()))).encode()).hexdigest()
    key = f"bm25:{digest[:32]}"
    stats = cache.get(key)
    if stats is None:
        with connection.cursor() as cursor:
            cursor.execute(_bm25_stats_sql(where, table), scope_params)
            stats = tuple(cursor.fetchone())
        cache.set(key, stats, settings.MEMORYHUB_BM25_STATS_TTL)
    params["bm25_n"], params["bm25_avgdl"] = stats
    return True


# Parameters that belong to the query, not to the scope.
_QUERY_PARAMS = {"query", "config", "vector", "model", "limit", "depth", "sem_depth", "k", "exact_below", "bm25_n", "bm25_avgdl", "kw_weight"}


# A participant with fewer facts than this is searched exactly (every row compared), more
# than this through the HNSW index: the planner cannot tell a heavy participant from a
# light one, and for heavy ones its HNSW-with-filter plan was 3x slower than an exact scan
# (bench/retrieval.py: heaviest participants' semantic p95 28 -> 9 ms).
def _participant_size(cap: str) -> str:
    """The run's participant's facts (any status), counted up to the parameter `cap`."""
    return (
        "(SELECT count(*) FROM (SELECT 1 FROM facts_fact s WHERE s.tenant_id = %(tenant)s AND s.project_id = %(project)s"
        f" AND s.participant_id = %(participant)s LIMIT %({cap})s) n)"
    )


_SMALL_PARTICIPANT = _participant_size("exact_below") + " < %(exact_below)s"


def _semantic_leg(where: str, normalise: bool = False, table: str = FACTS_TABLE, exact_below: bool = False,
                  window: str | None = None) -> str:
    """`sem (id, distance)`, nearest first, and `sem_ranked`. `window`: CTEs of the caller's
    that define `sem` themselves (recall's messages read with their neighbours)."""
    if window is not None:
        return window + _ranked("sem", "distance", "(1 - distance)", normalise, table)
    candidates = f"""
        SELECT f.id, f.embedding <=> %(vector)s::vector AS distance
        FROM {table}
        WHERE {where} AND f.embedding_model = %(model)s AND f.embedding IS NOT NULL"""
    if exact_below:
        # Two branches, one of which the constant guard empties at once; `+ 0` keeps the
        # exact branch off the vector index.
        body = f"""
        ({candidates} AND {_SMALL_PARTICIPANT}
        ORDER BY (f.embedding <=> %(vector)s::vector) + 0 LIMIT %(sem_depth)s)
        UNION ALL
        ({candidates} AND NOT {_SMALL_PARTICIPANT}
        ORDER BY distance LIMIT %(sem_depth)s)"""
    else:
        body = f"""{candidates}
        ORDER BY distance
        LIMIT %(sem_depth)s"""
    return f"""
    sem AS MATERIALIZED ({body}
    ),""" + _ranked("sem", "distance", "(1 - distance)", normalise, table)


def _ranked(leg: str, order: str, value: str | None, normalise: bool, table: str = "") -> str:
    """`<leg>_ranked`: each candidate's rank and, for score fusion, its score min-max normalised
    over the leg (`value` None: by place, the first 1 and the last 0, as for a leg whose
    scores are not on one scale). Over facts, candidates of equal relevance take their
    places by trust (verified, asserted, unverified), then id."""
    source, tie = leg, f"{leg}.id"
    if table == FACTS_TABLE:
        source, tie = f"{leg} JOIN facts_fact t ON t.id = {leg}.id", f"{trust_order('t')}, {leg}.id"
    rank = f"row_number() OVER (ORDER BY {order}, {tie})"
    if not normalise:
        return f"""
    {leg}_ranked AS (SELECT {leg}.id, {rank} AS r FROM {source})"""
    if value is None:
        return f"""
    {leg}_ranked AS (
        SELECT id, r, (CASE WHEN n > 1 THEN (n - r)::float8 / (n - 1) ELSE 1 END)::float8 AS norm
        FROM (SELECT {leg}.id, {rank} AS r, count(*) OVER () AS n FROM {source}) AS placed
    )"""
    # `value` grows with relevance; when all candidates tie, each scores 1
    lo, hi = f"min({value}) OVER ()", f"max({value}) OVER ()"
    norm = f", (CASE WHEN {hi} > {lo} THEN ({value} - {lo}) / ({hi} - {lo}) ELSE 1 END)::float8 AS norm"
    return f"""
    {leg}_ranked AS (SELECT {leg}.id, {rank} AS r{norm} FROM {source})"""


def _sql(
    intent_mode: str, where: str, match: str = "all", fusion: str = "rrf", exact_below: bool = False,
    given_stats: bool = False, size_column: bool = False,
) -> str:
    """The intent's statement: rows of fact columns, kr, sr, score. `size_column`: then also
    `place` and the participant's size (`_participant_size("size_cap")`), with one row of
    NULLs and the size when nothing matched, so the size always comes back."""
    if intent_mode == "none":
        ctes = ""
        select = f"SELECT {_SELECT_FACT}, NULL::bigint AS kr, NULL::bigint AS sr, 0::float8 AS score"
        source = f"FROM facts_fact f WHERE {where}"
        order = f"{TRUST_ORDER}, f.updated_at DESC, f.id DESC"
    else:
        ctes = fused_ctes(intent_mode, where, match, fusion, exact_below=exact_below, given_stats=given_stats)
        select = f"SELECT {_SELECT_FACT}, fused.kr, fused.sr, fused.score"
        source = "FROM fused JOIN facts_fact f ON f.id = fused.id"
        order = f"fused.score DESC, LEAST(COALESCE(fused.kr, 1000000), COALESCE(fused.sr, 1000000)), {TRUST_ORDER}, f.id"
    if not size_column:
        return f"""
    {ctes}
    {select}
    {source}
    ORDER BY {order}
    LIMIT %(limit)s"""
    return f"""
    {ctes}
    SELECT hits.*, {_participant_size("size_cap")} AS participant_size
    FROM (SELECT 1) AS one LEFT JOIN (
        {select}, row_number() OVER (ORDER BY {order}) AS place
        {source}
        ORDER BY {order}
        LIMIT %(limit)s
    ) AS hits ON true
    ORDER BY hits.place"""


def fused_ctes(
    intent_mode: str, where: str, match: str = "all", fusion: str = "rrf", table: str = FACTS_TABLE,
    exact_below: bool = False, given_stats: bool = False, semantic_window: str | None = None,
) -> str:
    """`WITH ... fused AS (id, kr, sr, score)`: the ranked legs over `table` (aliased f) and their fusion.
    `semantic_window`: the semantic leg's `sem` as the caller defines it (`_semantic_leg`)."""
    legs = []
    normalise = intent_mode == "both" and fusion == "score"
    if intent_mode in ("keyword", "both"):
        legs.append(_keyword_leg(where, match, normalise, table, given_stats))
    if intent_mode in ("semantic", "both"):
        legs.append(_semantic_leg(where, normalise, table, exact_below, semantic_window))
    if normalise:
        fused = """
        fused AS (
            SELECT COALESCE(k.id, s.id) AS id, k.r AS kr, s.r AS sr,
                   (%(kw_weight)s * COALESCE(k.norm, 0) + (1 - %(kw_weight)s) * COALESCE(s.norm, 0))::float8 AS score
            FROM kw_ranked k FULL OUTER JOIN sem_ranked s ON s.id = k.id
        )"""
    elif intent_mode == "both":
        fused = """
        fused AS (
            SELECT COALESCE(k.id, s.id) AS id, k.r AS kr, s.r AS sr,
                   (COALESCE(1.0 / (%(k)s + k.r), 0) + COALESCE(1.0 / (%(k)s + s.r), 0))::float8 AS score
            FROM kw_ranked k FULL OUTER JOIN sem_ranked s ON s.id = k.id
        )"""
    elif intent_mode == "keyword":
        fused = "fused AS (SELECT id, r AS kr, NULL::bigint AS sr, (1.0 / (%(k)s + r))::float8 AS score FROM kw_ranked)"
    else:
        fused = "fused AS (SELECT id, NULL::bigint AS kr, r AS sr, (1.0 / (%(k)s + r))::float8 AS score FROM sem_ranked)"
    return "WITH " + ",".join(legs + [fused])


def _rows_to_hits(rows: list[tuple], intent: Intent) -> list[Hit]:
    hits = []
    width = len(_FACT_COLUMNS)
    alias = connection.alias
    for row in rows:
        # Raw rows skip Django's converters: apply them (jsonb arrives as text, for one). The
        # columns not selected (embedding, search_vector) stay deferred; one value per
        # concrete field spares from_db its own padding (a list scan per field and row).
        values = [
            DEFERRED if place is None else convert(row[place], None, connection) if convert else row[place]
            for place, convert in _FACT_PLACES
        ]
        fact = Fact.from_db(alias, _FACT_ATTNAMES, values)
        kr, sr, score = row[width:width + 3]
        ranks = {}
        if kr is not None:
            ranks["keyword"] = int(kr)
        if sr is not None:
            ranks["semantic"] = int(sr)
        hits.append(Hit(fact=fact, ranks=ranks, score=float(score), intent=intent))
    return hits


_FACT_ATTNAMES = [f.attname for f in Fact._meta.concrete_fields if f.column in _FACT_COLUMNS]
# Per concrete field of Fact: its place in a selected row (None: not selected) and its converter.
_FACT_PLACES = [
    (_FACT_COLUMNS.index(f.column) if f.column in _FACT_COLUMNS else None, getattr(f, "from_db_value", None))
    for f in Fact._meta.concrete_fields
]


# --- Prepared statements, except for people with many facts ------------------------------
#
# Planning a same-user statement costs more than running it for most people: at 100k facts,
# 0.8-1.1 ms of planning a hybrid read against 0.4-0.6 ms of running it, for a person with
# 30-150 facts. A prepared statement is planned once per connection (PostgreSQL settles on a
# generic plan after five runs), but a generic plan cannot tell a heavy participant from a
# light one: for a person with thousands of facts its keyword leg reads all of them (4 ms
# instead of 0.7 at 100k; a keyword-only read breaks even at a few hundred facts, hence the
# default of 200). So same-user statements are prepared unless the person is known to hold
# MEMORYHUB_PREPARED_BELOW facts or more. A prepared statement also returns the
# person's size (counted up to that number, in the same round trip), so a worker learns who
# is heavy on their first read and plans their statements each time (without the count)
# for MEMORYHUB_PARTICIPANT_SIZE_TTL seconds; then one prepared read counts again. Either
# way the answer is the same: only the time differs.


class _HeavyPeople:
    """(tenant, project, participant) of people known to hold many facts; per process, for
    a while. Keys are all it keeps (no content), and at most `max_entries`."""

    def __init__(self, max_entries: int = 100_000):
        self.max_entries = max_entries
        self._until: dict[tuple, float] = {}
        self._lock = threading.Lock()

    def __contains__(self, key: tuple) -> bool:
        until = self._until.get(key)
        return until is not None and until >= time.monotonic()

    def add(self, key: tuple, ttl: float) -> None:
        with self._lock:
            self._until.pop(key, None)
            while len(self._until) >= self.max_entries:  # the oldest first
                self._until.pop(next(iter(self._until)))
            self._until[key] = time.monotonic() + ttl

    def clear(self) -> None:
        with self._lock:
            self._until.clear()


heavy_people = _HeavyPeople()


def _cursor(*, prepared: bool):
    """core.connections.cursor: a server-binding (prepared) cursor, or Django's own."""
    return connections.cursor(prepared=prepared)


def search_mode(run: Run, intent: Intent, result: Result, params: dict, *, embedder: Embedder | None, vector_cache: dict | None) -> str:
    """The mode an intent really runs in (no query: none; no embeddings: keyword), its parameters set."""
    mode = intent.mode
    query = run.query.strip()
    if mode != "none" and not query:
        mode = "none"
    if mode in ("semantic", "both"):
        if embedder is None:
            result.warn(
                "semantic-unavailable",
                "Search by meaning is off (no embeddings provider is configured), so this read used keyword search only.",
            )
            mode = "keyword"
        else:
            cache = vector_cache if vector_cache is not None else {}
            if query not in cache:
                cache[query] = query_vector_literal(embedder, query)
            params["vector"] = cache[query]
            params["model"] = embedder.model
    if mode in ("keyword", "both"):
        params["query"] = query
        params["config"] = project_search_config(run.project_id)
    return mode


def intent_params(run: Run, intent: Intent, result: Result) -> dict[str, Any] | None:
    """The parameters every intent's statement starts from; None (and the seed's warning)
    for a same-user intent in a run that names no participant: it reads nothing."""
    if intent.scope == "same-user" and run.participant_id is None:
        result.warn("memory-needs-participant", NEEDS_PARTICIPANT.format(who=run.who))
        return None
    depth = max(MIN_DEPTH, 4 * intent.limit)
    return {"limit": intent.limit, "k": RRF_K, "depth": depth, "sem_depth": semantic_depth(intent, depth), "kw_weight": intent.keyword_weight}


def semantic_depth(intent: Intent, depth: int) -> int:
    """The semantic leg's candidates: `depth`, but under RRF in mode both only the intent's
    `limit`. The keyword leg returns only facts that share a word with the query; the
    semantic leg ranks every fact, and its ranks past the limit are mostly noise that RRF
    (which counts places, not similarities) would weigh like a keyword match's. Measured on
    the tuned halves (docs/benchmarks.md), plain `both` goes from below BM25 on LoCoMo
    (any@10 .670 against .684) to above it (.701), and on MADial from .825 to .812 (BM25
    .675)."""
    return intent.limit if intent.mode == "both" and intent.fusion == "rrf" else depth


def run_intent(run: Run, intent: Intent, result: Result, *, embedder: Embedder | None = None, vector_cache: dict | None = None) -> list[Hit]:
    """Rows for one intent, ranked; adds warnings to `result`."""
    params = intent_params(run, intent, result)
    if params is None:
        return []
    conds = _conditions(run, intent, params)
    if conds is None:
        return []
    mode = search_mode(run, intent, result, params, embedder=embedder, vector_cache=vector_cache)
    exact_below = intent.scope == "same-user" and mode in ("semantic", "both")
    if exact_below:
        params["exact_below"] = settings.MEMORYHUB_EXACT_SCAN_BELOW
    where = " AND ".join(conds)
    given_stats = bm25_stats(intent, mode, where, params)
    reranking = intent.rerank and mode != "none"
    if reranking:  # the reranker reads more of the fused candidates than the intent keeps
        params["limit"] = max(intent.limit, RERANK_DEPTH)
    # Prepared (and counting the person's facts) unless the person is known to be heavy.
    size_key = None
    if intent.scope == "same-user" and settings.MEMORYHUB_PREPARED_BELOW > 0:
        key = (run.principal.tenant_id, run.project_id, run.participant_id)
        if key not in heavy_people:
            size_key = key
            params["size_cap"] = settings.MEMORYHUB_PREPARED_BELOW
    sql = _sql(mode, where, intent.match, intent.fusion, exact_below, given_stats, size_column=size_key is not None)
    with _cursor(prepared=size_key is not None) as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if size_key is not None:
        if rows[0][-1] >= settings.MEMORYHUB_PREPARED_BELOW:
            heavy_people.add(size_key, settings.MEMORYHUB_PARTICIPANT_SIZE_TTL)
        rows = [row for row in rows if row[_ID_PLACE] is not None]  # the row of NULLs when nothing matched
    return final_order(run, intent, _rows_to_hits(rows, intent), result, reranking=reranking)


def final_order(run: Run, intent: Intent, hits: list[Hit], result: Result, *, reranking: bool) -> list[Hit]:
    """The intent's hits in the order it returns them, at most `limit`: the fusion's order, or
    the reranker's when the intent reranks. Any later ordering rule (a tie-break by trust,
    say) belongs here, after the fusion and the reranker, so every caller of `run_intent`
    (context, /v1/retrieve, explain, the benches) gets it."""
    if not reranking:
        return hits[:intent.limit]
    reranker = get_reranker()
    if reranker is None:
        result.warn(
            "rerank-unavailable",
            "Reranking is off (no reranker is installed or MEMORYHUB_RERANKER is none), so this read kept the fusion's order.",
        )
        return hits[:intent.limit]
    return rerank_hits(hits, run.query.strip(), intent.limit, reranker)


def facts_retrieve(*, run: Run, intents: list[Intent]) -> Result:
    """Run each intent; a fact found by several intents is reported once, by the first."""
    result = Result()
    embedder = get_embedder() if any(i.mode in ("semantic", "both") for i in intents) else None
    vectors: dict[str, str] = {}  # query -> its embedding, as SQL takes it
    seen: set = set()
    for intent in intents:
        for hit in run_intent(run, intent, result, embedder=embedder, vector_cache=vectors):
            if hit.fact.id in seen:
                continue
            seen.add(hit.fact.id)
            result.hits.append(hit)
    return result
