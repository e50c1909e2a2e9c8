"""The gate's adjudication study (bench/gate_adjudication/, docs/benchmarks.md "Memory gate"):
what the judges were shown carries no label, each text had two judges, none is from the test
split, and the report reads what is committed."""

from __future__ import annotations

import collections
import json

from approvals.intent_train import load_corpus
from bench.gate_adjudication import adjudicate


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_judges_saw_text_only_two_to_a_text_and_labelled_every_line_in_order():
    sample = {item["id"]: item for item in _lines(adjudicate.SAMPLE)}
    seen = collections.Counter()
    for number in range(1, 7):
        batch = _lines(adjudicate.BATCHES / f"batch-{number}.jsonl")
        judged = _lines(adjudicate.JUDGMENTS / f"judge-{number}.jsonl")
        assert all(set(line) == {"id", "text"} for line in batch)  # no label, category, source or score
        assert [line["id"] for line in judged] == [line["id"] for line in batch]
        assert {line["label"] for line in judged} <= {"remember", "hold", "unclear"}
        assert all(sample[line["id"]]["text"] == line["text"] for line in batch)
        seen.update(line["id"] for line in batch)
    assert set(seen) == set(sample) and set(seen.values()) == {2}


def test_no_text_of_the_test_split_was_sampled():
    splits = collections.defaultdict(set)
    for row in load_corpus():
        splits[row["text"]].add(row["split"])
    assert all(splits[item["text"]] and "test" not in splits[item["text"]] for item in _lines(adjudicate.SAMPLE))


def test_the_report_reads_the_committed_judgments(capsys):
    adjudicate.command_report()
    out = capsys.readouterr().out
    assert "450 texts, two judges each" in out and "re-counted by the judges" in out
