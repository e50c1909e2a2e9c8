"""workspaces.query: the memory_query language, without Django or a database.

Golden results for the four examples of the tool's description, every operator and
function family, join and union semantics, result shaping and limits, syntax errors with
exact positions and expected tokens, the bounds on time and size, and fuzzing that no input
raises anything but QueryError or runs past the deadline.
"""

from __future__ import annotations

import copy
import json
import string
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from workspaces.query import DEFAULT_LIMIT, MAX_LIMIT, QueryError, QuerySyntaxError, bounds, run_query

MEMORY = [
    {
        "key": "deploy",
        "value": "blue/green behind the flag",
        "namespace": "ops",
        "type": "decision",
        "references": ["adr:7"],
        "createdAt": "2025-01-01T10:00:00Z",
        "updatedAt": "2025-01-02T10:00:00Z",
    },
    {
        "key": "db-timeout",
        "value": "connection pool exhausted under load",
        "namespace": "ops",
        "type": "error",
        "references": [],
        "createdAt": "2025-01-03T09:00:00Z",
        "updatedAt": "2025-01-03T09:00:00Z",
    },
    {
        "key": "search",
        "value": {"engine": "postgres", "k": 20},
        "namespace": "dev",
        "type": "note",
        "references": ["doc:search", "adr:7"],
        "createdAt": "2025-01-04T12:00:00Z",
        "updatedAt": "2025-01-05T12:00:00Z",
    },
    {
        "key": "lint",
        "value": "ruff fails on E501",
        "namespace": "dev",
        "type": "error",
        "references": [],
        "createdAt": "2025-01-06T08:30:00Z",
        "updatedAt": "2025-01-06T08:30:00Z",
    },
]
TOOL_CALLS = [
    {"name": "deploy", "args": {"env": "prod"}, "result": "ok", "timestamp": "2025-01-07T10:00:00Z"},
    {"name": "search", "args": {"q": "pool"}, "result": "3 hits", "timestamp": "2025-01-07T10:01:00Z"},
    {"name": "deploy", "args": {"env": "staging"}, "result": "failed", "timestamp": "2025-01-07T10:02:00Z"},
    {"name": "shell", "args": None, "result": "exit 1", "timestamp": "2025-01-07T10:03:00Z"},
]
TASKS = [
    {"id": 1, "desc": "fix the db timeout", "status": "in_progress", "rounds": 2, "note": None},
    {"id": 2, "desc": "write the runbook", "status": "pending", "rounds": 0, "note": "after the fix"},
    {"id": 3, "desc": "ship", "status": "done", "rounds": 5, "note": None},
]
RELATIONS = {"memory": MEMORY, "tool_calls": TOOL_CALLS, "tasks": TASKS}

# Expected after an operand and where an operand is expected (the sorted `expected` lists).
AFTER_OPERAND = [
    '"!="', '"%"', '"&&"', '"*"', '"**"', '"+"', '"-"', '"."', '"/"', '"<"', '"<="', '"=="', '">"', '">="',
    '"?"', '"?."', '"??"', '"["', '"^"', '"and"', '"contains"', '"endsWith"', '"in"', '"not"', '"or"',
    '"startsWith"', '"|"', '"||"',
]  # fmt: skip
OPERAND = [
    "a name", "a number", "a string",
    '"!"', '"#"', '"("', '"+"', '"-"', '"."', '"["', '"false"', '"nil"', '"not"', '"true"', '"{"',
]  # fmt: skip


def rows(query: str, limit: int = DEFAULT_LIMIT, relations: dict | None = None) -> list:
    return run_query(query, RELATIONS if relations is None else relations, limit)["rows"]


def value(query: str) -> object:
    """The value of a query whose result is a scalar (one {"value": ...} row) or nil (no rows)."""
    result = rows(query)
    if not result:
        return None
    assert len(result) == 1 and list(result[0]) == ["value"], result
    return result[0]["value"]


def error(query: str, relations: dict | None = None, limit: int = DEFAULT_LIMIT) -> QueryError:
    with pytest.raises(QueryError) as caught:
        run_query(query, RELATIONS if relations is None else relations, limit)
    return caught.value


# --- the examples of the tool description -----------------------------------------------------


def test_golden_select():
    assert run_query('filter(memory, .type == "error")', RELATIONS, limit=20) == {
        "rows": [MEMORY[1], MEMORY[3]],
        "count": 2,
        "truncated": False,
    }


def test_golden_project():
    assert run_query("map(memory, {key: .key, value: .value})", RELATIONS) == {
        "rows": [
            {"key": "deploy", "value": "blue/green behind the flag"},
            {"key": "db-timeout", "value": "connection pool exhausted under load"},
            {"key": "search", "value": {"engine": "postgres", "k": 20}},
            {"key": "lint", "value": "ruff fails on E501"},
        ],
        "count": 4,
        "truncated": False,
    }


def test_golden_join():
    result = run_query('join(tool_calls, memory, "name", "key")', RELATIONS)
    assert result["count"] == 3 and not result["truncated"]
    assert result["rows"][0] == {
        "left_name": "deploy",
        "left_args": {"env": "prod"},
        "left_result": "ok",
        "left_timestamp": "2025-01-07T10:00:00Z",
        "right_key": "deploy",
        "right_value": "blue/green behind the flag",
        "right_namespace": "ops",
        "right_type": "decision",
        "right_references": ["adr:7"],
        "right_createdAt": "2025-01-01T10:00:00Z",
        "right_updatedAt": "2025-01-02T10:00:00Z",
    }
    # left order (deploy, search, deploy); "shell" matches nothing
    assert [(r["left_name"], r["left_result"], r["right_key"]) for r in result["rows"]] == [
        ("deploy", "ok", "deploy"),
        ("search", "3 hits", "search"),
        ("deploy", "failed", "deploy"),
    ]


def test_golden_union():
    query = 'union(filter(memory, .type == "error"), filter(memory, .type == "decision"))'
    assert run_query(query, RELATIONS) == {"rows": [MEMORY[1], MEMORY[3], MEMORY[0]], "count": 3, "truncated": False}


def test_inputs_are_not_modified():
    before = copy.deepcopy(RELATIONS)
    rows('join(tool_calls, memory, "name", "key") | sortBy(.left_timestamp, "desc")')
    rows("union(memory, tasks, map(tool_calls, {name: upper(.name)}))")
    assert RELATIONS == before


# --- operators ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # literals
        ('"a\\tb\\n\\"q\\" \\\\ \\u00e9 \\x41 \\101 \\U0001F600"', 'a\tb\n"q" \\ é A A 😀'),
        ("'single \\' \"double\"'", "single ' \"double\""),
        ("`raw \\n stays`", "raw \\n stays"),
        ("42", 42),
        ("0x2A + 0o52 + 0b101010 + 1_000", 1126),
        ("0.5 + .5 + 1e3 + 2.5e-1", 1001.25),
        ("true", True),
        # comparison
        ("1 == 1.0", True),
        ('1 == "1"', False),
        ("true == 1", False),
        ("nil == nil", True),
        ("nil != 0", True),
        ("[1, {a: 2}] == [1.0, {a: 2}]", True),
        ("{a: 1} == {a: 1, b: 2}", False),
        ("2 < 10", True),
        ('"2" < "10"', False),
        ("1.5 <= 1.5", True),
        ('"b" > "a"', True),
        ("3 >= 4", False),
        # logic, with keyword forms and short-circuit (the right side would be an error)
        ("true && !false", True),
        ("true and not false", True),
        ("false || true", True),
        ("false or false", False),
        ("false && 1 / 0 > 1", False),
        ("true || 1 / 0 > 1", True),
        ("not true == false", True),  # (not true) == false, as in expr-lang
        # membership and strings
        ('"deploy" in ["lint", "deploy"]', True),
        ("1 in [1.0]", True),
        ('"k" in {k: nil}', True),
        ('"x" not in {k: 1}', True),
        ('"a" in nil', False),
        ('"pool exhausted" contains "exhaust"', True),
        ('"pool" not contains "x"', True),
        ('"adr:7" startsWith "adr:"', True),
        ('"adr:7" not startsWith "doc:"', True),
        ('"a.md" endsWith ".md"', True),
        ('"a.md" not endsWith ".md"', False),
        # arithmetic
        ("1 + 2 * 3 - 4", 3),
        ("(1 + 2) * 3", 9),
        ("7 / 2", 3.5),
        ("6 / 3", 2.0),
        ("7 % 3", 1),
        ("-7 % 3", -1),  # Go's sign rule
        ("2 ** 10", 1024.0),
        ("2 ^ 3 ^ 2", 512.0),  # right-associative
        ("-2 ** 2", -4.0),
        ("- -3 + +2", 5),
        ('"mem" + "ory"', "memory"),
        ("1 + 2.5", 3.5),
        # ternary, nil coalescing, optional chaining
        ('len(tasks) > 2 ? "many" : "few"', "many"),
        ("true ? 1 : false ? 2 : 3", 1),
        ("nil ?? 5", 5),
        ("tasks[0].note ?? -1", -1),
        ("-(nil ?? 2) == -nil ?? 2", True),  # ?? binds tighter than unary minus, as in expr-lang
        ("tasks[0].note ?? tasks[1].note", "after the fix"),
        ("tool_calls[3].args?.env", None),
        ("tool_calls[3].args?.env.deeper", None),
        # member access
        ("tasks[0].desc", "fix the db timeout"),
        ('tasks[1]["status"]', "pending"),
        ("memory[2].value.engine", "postgres"),
        ("memory[-1].key", "lint"),
        ("memory[0].references[0]", "adr:7"),
        ("memory[0].missing", None),
        ('"abc"[1]', "b"),
        ('"abcdef"[1:3]', "bc"),
        ("[1, 2, 3, 4][:2] == [1, 2] && [1, 2, 3][1:] == [2, 3] && [1, 2, 3][-2:] == [2, 3]", True),
        # pipes and comments
        ("memory | filter(.type == 'error') | map(.key) | len()", 2),
        ("len(memory) // the number of memories", 4),
        ("/* block */ len(tasks)", 3),
    ],
)
def test_operators(query, expected):
    result = value(query)
    assert result == expected and type(result) is type(expected)


def test_array_and_map_literals():
    assert rows("[1, 'a', nil, [true], {b: 2},]") == [{"value": 1}, {"value": "a"}, {"value": None}, {"value": [True]}, {"b": 2}]
    assert rows('{a: 1, "b c": [2], type: "x",}') == [{"a": 1, "b c": [2], "type": "x"}]
    assert rows("{}") == [{}] and rows("[]") == []


def test_predicate_forms():
    assert [r["key"] for r in rows('filter(memory, {.type == "error"})')] == ["db-timeout", "lint"]
    assert [r["key"] for r in rows('filter(memory, #.namespace == "dev")')] == ["search", "lint"]
    assert rows("map(tasks, #index)") == [{"value": 0}, {"value": 1}, {"value": 2}]
    assert rows("map([1, 2], # * 10)") == [{"value": 10}, {"value": 20}]
    # an inner predicate's # is its own element
    assert rows('filter(memory, any(.references, # startsWith "adr:"))') == [MEMORY[0], MEMORY[2]]
    assert rows("map(tasks, {id: .id, big: .rounds > 1, label: .desc + ' (' + .status + ')'})")[0] == {
        "id": 1,
        "big": True,
        "label": "fix the db timeout (in_progress)",
    }


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ('count(memory, .type == "error")', 2),
        ('any(tasks, .status == "done")', True),
        ("all(tasks, .rounds >= 0)", True),
        ('none(tasks, .status == "failed")', True),
        ('one(memory, .type == "note")', True),
        ('find(tool_calls, .result == "failed").args.env', "staging"),
        ('findIndex(memory, .key == "search")', 2),
        ('findLast(tool_calls, .name == "deploy").result', "failed"),
        ('findLastIndex(memory, .type == "nope")', -1),
        ('len(memory) + len("abc") + len({a: 1})', 8),
        ("first(tasks).id + last(tasks).id", 4),
        ("first(filter(tasks, false))", None),
        ("sum(map(tasks, .rounds))", 7),
        ("mean(map(tasks, .rounds))", 7 / 3),
        ("max(map(tasks, .rounds)) - min(3, 1, 2)", 4),
        ('max(["b", "c", "a"])', "c"),
        ('lower("AbC") + upper("x") + trim("  y  ") + trim("__z__", "_")', "abcXyz"),
        ('trimPrefix("adr:7", "adr:") + trimSuffix("a.md", ".md")', "7a"),
        ('indexOf("banana", "an") * 10 + lastIndexOf("banana", "an")', 13),
        ('hasPrefix("abc", "ab") && hasSuffix("abc", "bc")', True),
        ('replace("a-b-c", "-", "+")', "a+b+c"),
        ('join(split("a,b,c", ","), "/")', "a/b/c"),
        ('join(["x", "y"])', "xy"),
        ('len(split("a,b,c", ",", 2))', 2),
        ('string(1.0) + string(2.5) + string(true) + string(nil) + string([1])', "12.5truenil[1]"),
        ('int("42") + int(3.9) + float("0.5")', 45.5),
        ('type(nil) + type(1) + type(1.5) + type("") + type([]) + type({}) + type(true)', "nilintfloatstringarraymapbool"),
        ("toJSON(tasks[0])", '{"id":1,"desc":"fix the db timeout","status":"in_progress","rounds":2,"note":null}'),
        ("abs(-3) + ceil(1.2) + floor(1.8) + round(2.5) + round(-2.5)", 6.0),
        ("len(keys(tasks[0])) + len(values(tasks[0]))", 10),
        ("take(memory, 2) == [memory[0], memory[1]]", True),
        ("reverse([1, 2, 3])", None),  # an array of several values: rows, checked below
    ],
)
def test_functions(query, expected):
    if query.startswith("reverse"):
        assert rows(query) == [{"value": 3}, {"value": 2}, {"value": 1}]
    else:
        assert value(query) == expected


def test_sorting():
    assert [r["key"] for r in rows("sortBy(memory, .createdAt, 'desc')")] == ["lint", "search", "db-timeout", "deploy"]
    assert [r["id"] for r in rows("sortBy(tasks, .rounds)")] == [2, 1, 3]
    assert [r["id"] for r in rows('sortBy(tasks, "rounds", "desc")')] == [3, 1, 2]  # a field name also works
    assert [r["id"] for r in rows("sortBy(tasks, .note)")] == [2, 1, 3]  # nil keys last, in their order
    assert rows("sort([3, nil, 1.5, 2])") == [{"value": 1.5}, {"value": 2}, {"value": 3}, {"value": None}]
    assert rows('sort(["b", "a"], "desc")') == [{"value": "b"}, {"value": "a"}]
    assert "only order numbers or strings" in str(error('sort([1, "a"])'))
    assert 'takes "asc" or "desc"' in str(error('sort([1], "up")'))


# --- join and union -----------------------------------------------------------------------------


def test_join_prefixes_every_field_so_same_names_never_collide():
    relations = {"a": [{"id": 1, "name": "left"}], "b": [{"id": 1, "name": "right", "extra": True}]}
    assert rows('join(a, b, "id", "id")', relations=relations) == [
        {"left_id": 1, "left_name": "left", "right_id": 1, "right_name": "right", "right_extra": True}
    ]


def test_join_rows_missing_the_field_or_nil_match_nothing():
    relations = {
        "a": [{"k": 1, "n": "a1"}, {"n": "a-missing"}, {"k": None, "n": "a-nil"}, {"k": 2, "n": "a2"}],
        "b": [{"k": None, "n": "b-nil"}, {"n": "b-missing"}, {"k": 1.0, "n": "b1"}, {"k": True, "n": "b-true"}],
    }
    assert [(r["left_n"], r["right_n"]) for r in rows('join(a, b, "k", "k")', relations=relations)] == [("a1", "b1")]
    assert [(r["left_n"], r["right_n"]) for r in rows('join(b, a, "k", "k")', relations=relations)] == [("b1", "a1")]


def test_join_matches_by_value_in_order_and_combines_with_other_operations():
    relations = {
        "a": [{"k": [1, {"x": "y"}]}, {"k": "s"}],
        "b": [{"k": "s", "i": 1}, {"k": [1.0, {"x": "y"}], "i": 2}, {"k": "s", "i": 3}],
    }
    assert [r["right_i"] for r in rows('join(a, b, "k", "k")', relations=relations)] == [2, 1, 3]
    query = (
        'join(tool_calls, memory, "name", "key") | filter(.left_result == "failed")'
        " | map({call: .left_name, memory: .right_value})"
    )
    assert rows(query) == [{"call": "deploy", "memory": "blue/green behind the flag"}]


def test_join_argument_errors():
    assert "needs an array as argument 2, got string" in str(error('join(memory, "x", "key", "key")'))
    assert "needs a string as argument 3" in str(error('join(memory, memory, 1, "key")'))
    assert "row 1 of the left relation is int" in str(error('join([1], memory, "key", "key")'))
    assert "Wrong number of arguments (3) to join()" in str(error('join(memory, memory, "key")'))


def test_union_is_a_set_union_in_order_and_concat_keeps_duplicates():
    assert rows("union([1, 2, 2], [3, 1, 1.0, true])") == [{"value": 1}, {"value": 2}, {"value": 3}, {"value": True}]
    assert rows("union(memory, memory)") == MEMORY
    assert rows("union(tasks, [], filter(memory, .key == 'lint'))") == [*TASKS, MEMORY[3]]
    assert rows("concat([1, 2], [2, 1])") == [{"value": 1}, {"value": 2}, {"value": 2}, {"value": 1}]
    assert rows("uniq([{a: 1}, {a: 1.0}, {a: 2}])") == [{"a": 1}, {"a": 2}]
    assert "needs an array as argument 2" in str(error("union(memory, 1)"))


# --- results and limits ---------------------------------------------------------------------------


def test_result_shapes():
    assert run_query('count(memory, .type == "error")', RELATIONS) == {"rows": [{"value": 2}], "count": 1, "truncated": False}
    assert run_query("tasks[0]", RELATIONS)["rows"] == [TASKS[0]]
    assert run_query("map(memory, .key)", RELATIONS)["rows"][:2] == [{"value": "deploy"}, {"value": "db-timeout"}]
    assert run_query("find(memory, .key == 'none')", RELATIONS) == {"rows": [], "count": 0, "truncated": False}
    assert run_query("tasks", {"tasks": []}) == {"rows": [], "count": 0, "truncated": False}
    json.dumps(run_query('join(tool_calls, memory, "name", "key")', RELATIONS), allow_nan=False)


def test_limit_count_and_truncated():
    many = {"memory": [{"key": f"k{i}", "type": "error" if i % 3 == 0 else "note"} for i in range(700)]}
    result = run_query("memory", many)
    assert (len(result["rows"]), result["count"], result["truncated"]) == (DEFAULT_LIMIT, 700, True)
    assert result["rows"][0]["key"] == "k0" and result["rows"][-1]["key"] == "k49"
    result = run_query('filter(memory, .type == "error")', many, limit=MAX_LIMIT)
    assert (len(result["rows"]), result["count"], result["truncated"]) == (234, 234, False)
    result = run_query('filter(memory, .type == "error")', many, limit=234)
    assert (len(result["rows"]), result["count"], result["truncated"]) == (234, 234, False)
    result = run_query("memory", many, limit=1)
    assert (result["rows"], result["count"], result["truncated"]) == ([{"key": "k0", "type": "error"}], 700, True)


@pytest.mark.parametrize("limit", [0, -1, MAX_LIMIT + 1, True, "5", 2.5, None])
def test_limit_validation(limit):
    assert "limit must be an integer from 1 to 500" in str(error("memory", limit=limit))


# --- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("notes", 'Unknown name "notes"; the relations are: memory, tasks, tool_calls'),
        ('filter(memory, type == "error")', 'inside a predicate write ".type" for a field of the current row (line 1, column 16)'),
        (".type", 'A field reference like ".type" or "#" can only be used inside a predicate'),
        ("map(memory, .key) + #", "can only be used inside a predicate"),
        ("filter(memory, #acc)", 'Unknown "#acc"'),
        ("select(memory)", "Unknown function select(); the functions are: abs, all, any,"),
        ("memory(1)", '"memory" is a relation, not a function'),
        ("filter(memory)", "Wrong number of arguments (1) to filter(); it is called as filter(array, predicate)"),
        ("filter(memory, .key)", "The predicate of filter() must be true or false, got string"),
        ("filter(tasks, .note contains 'fix')", 'Operator "contains" is not defined on nil and string; a value is nil'),
        ('1 < "a"', 'Operator "<" is not defined on int and string (line 1, column 3)'),
        ("nil > 1", "give it a default with ??"),
        ('"a" in "abc"', 'Operator "in" is not defined on a string; use contains'),
        ("1 in {a: 1}", "Cannot look up a key of type int in a map"),
        ("[1] contains 1", 'Operator "contains" is not defined on array and int'),
        ('"ab" * 3', 'Operator "*" is not defined on string and int'),
        ('"a" + 1', 'Operator "+" is not defined on string and int'),
        ("[1] + [2]", "use concat(a, b) or union(a, b)"),
        ("1 / 0", "Division by zero (line 1, column 3)"),
        ("1 % 0", "Modulo by zero"),
        ("1.5 % 1", 'Operator "%" is not defined on float and int'),
        ("9223372036854775807 + 1", "Integer overflow"),
        ("99999999999999999999", "too large for a 64-bit int"),
        ("1e999", "out of range"),
        ("10.0 ** 400", "The power is out of range"),
        ("1 && true", "The operands of &&/and must be true or false, got int"),
        ("!1", 'The operand of "!"/"not" must be true or false'),
        ("-'a'", 'Unary "-" needs a number, got string'),
        ("1 ? 2 : 3", "The condition of ?: must be true or false, got int"),
        ("tool_calls[3].args.env", 'Cannot read "env" of nil; use ?. to allow a missing value'),
        ("memory[4]", "Index 4 is out of range for array of length 4"),
        ('memory["a"]', "An index into array must be an int, got string"),
        ("tasks[0][1]", "A map key must be a string, got int"),
        ("(1)[0]", 'Cannot read "0" of int'),
        ("1[1:]", "Cannot slice int"),
        ("len(1)", "len() needs a string, array or map as argument 1, got int"),
        ("take(memory, -1)", "take() needs a count of 0 or more"),
        ("int('x')", 'int() cannot read "x" as an int'),
        ("float('inf')", "float() cannot read"),
        ("sum(['a'])", "sum() works on numbers, found string"),
        ("max(memory)", "max() compares numbers or strings, not map"),
    ],
)
def test_runtime_errors(query, message):
    assert message in str(error(query))


def test_errors_name_the_position_on_later_lines():
    assert str(error('filter(memory,\n  .namespace == "ops" &&\n  .rounds > 1)')).endswith("(line 3, column 11)")


# --- syntax errors --------------------------------------------------------------------------------


def syntax_error(query: str) -> QuerySyntaxError:
    with pytest.raises(QuerySyntaxError) as caught:
        run_query(query, RELATIONS)
    err = caught.value
    assert str(err) == err.detail and isinstance(err, QueryError)
    assert err.expected == sorted(err.expected, key=lambda d: (d.startswith('"'), d))
    return err


def test_syntax_error_missing_operand():
    err = syntax_error('filter(memory, .type == )')
    assert (err.line, err.column, err.expected) == (1, 25, OPERAND)
    assert err.detail == (
        'Unexpected ")" at line 1, column 25; expected one of: a name, a number, a string, '
        '"!", "#", "(", "+", "-", ".", "[", "false", "nil", "not", "true", "{"'
    )


def test_syntax_error_unclosed_call():
    err = syntax_error('filter(memory, .type == "error"')
    assert (err.line, err.column) == (1, 32)
    assert err.expected == sorted([*AFTER_OPERAND, '")"', '","'], key=lambda d: (d.startswith('"'), d))
    assert err.detail.startswith('Unexpected end of query at line 1, column 32; expected one of: "!=", "%", "&&", ")"')


def test_syntax_error_lists_what_was_possible_before_the_bad_token():
    # LALR reduces `1` before rejecting `]`; the operators that could continue `1` still count
    err = syntax_error('"x" +\n 1 ]')
    assert (err.line, err.column, err.expected) == (2, 4, ["end of query", *AFTER_OPERAND])


def test_syntax_error_unknown_character_on_a_later_line():
    err = syntax_error('filter(memory,\n  .type = "error")')
    assert (err.line, err.column) == (2, 9)
    assert err.detail.startswith('Unexpected character "=" at line 2, column 9; expected one of: "!=", "%", "&&", ")"')
    assert '"=="' in err.expected and '")"' in err.expected


@pytest.mark.parametrize(
    ("query", "line", "column", "expected"),
    [
        ("", 1, 1, OPERAND),
        ("   \n  ", 2, 3, OPERAND),
        ("memory memory", 1, 8, ["end of query", *sorted([*AFTER_OPERAND, '"("'])]),  # a name may be called
        ("map(memory, {key: })", 1, 19, OPERAND),
        ("map(memory, {key: .key value: .value})", 1, 24, None),
        ("tasks[0].", 1, 10, ["a name"]),
        ("[1, 2", 1, 6, None),
        ("1 +* 2", 1, 4, OPERAND),
        ("tasks[1:2:3]", 1, 10, None),
        ("filter(memory, .type == 'error'))", 1, 33, ["end of query", *AFTER_OPERAND]),
        ("a ? b", 1, 6, None),
        ("memory | 1", 1, 10, ["a name"]),
        ("x @ y", 1, 3, None),
    ],
)
def test_syntax_error_positions(query, line, column, expected):
    err = syntax_error(query)
    assert (err.line, err.column) == (line, column), err.detail
    assert f"at line {line}, column {column}" in err.detail
    if expected is not None:
        assert err.expected == expected


def test_syntax_error_unterminated_string_and_bad_escape():
    err = syntax_error('filter(memory, .key == "deploy)')
    assert (err.line, err.column, err.expected) == (1, 24, ["a closing '\"'"])
    assert err.detail == "Unterminated string starting at line 1, column 24; expected a closing '\"'"
    err = syntax_error('"ok \\q"')
    assert (err.line, err.column) == (1, 5) and "\\n" in err.expected
    assert err.detail.startswith('Invalid escape sequence "\\q" at line 1, column 5; expected one of: ')
    assert syntax_error('"\\ud800"').column == 2  # a lone surrogate is not a character


# --- bounds ---------------------------------------------------------------------------------------


def test_query_length_is_capped():
    assert "characters long; the limit is 4,000" in str(error("1 + " * 1000 + "1"))


@pytest.mark.parametrize(
    "query",
    [
        "-" * 1500 + "1",
        "not " * 900 + "true",
        "[" * 1500 + "]" * 1500,
        "{a: " * 700 + "1" + "}" * 700,
        "(1 + " * 600 + "1" + ")" * 600,
        "len(" * 700 + "memory" + ")" * 700,
        "memory" + "[0]" * 1000,
    ],
)
def test_deep_nesting_is_a_query_error_not_a_recursion_error(query):
    assert "nests more than 64 levels deep" in str(error(query))


def test_long_flat_chains_and_redundant_parentheses_are_fine():
    assert value("1" + " + 1" * 900) == 901
    assert value("true" + " && true" * 400)
    assert value("(" * 1900 + "7" + ")" * 1900) == 7


def test_deeply_nested_data_is_a_query_error():
    deep: list = []
    for _ in range(2000):
        deep = [deep]
    relations = {"memory": [{"key": "a", "value": deep}]}
    assert "nested more than 64 levels deep" in str(error("filter(memory, .value == .value)", relations))
    assert "nested more than 64 levels deep" in str(error("union(memory, memory)", relations))
    assert "nested more than 64 levels deep" in str(error("memory", relations))


def test_join_explosion_stops_before_building_rows():
    relations = {"r": [{"k": i % 2, "i": i} for i in range(300)]}
    assert run_query('join(r, r, "k", "k")', relations)["count"] == 45_000
    started = time.monotonic()
    message = str(error('join(join(r, r, "k", "k"), r, "left_k", "k")', relations))
    assert "The join would produce 6,750,000 rows; the limit is 100,000" in message
    assert time.monotonic() - started < 1.0


def test_string_doubling_stops_at_the_size_caps():
    query = "map(tool_calls, .result)"
    for _ in range(30):
        query = f"map({query}, # + #)"
    started = time.monotonic()
    assert "A string of 1,572,864 characters would be built; the limit is 1,000,000" in str(error(query))  # "3 hits"
    # many strings under the per-string cap: 240 rows, each a running sum of 30 JSON copies
    wide = "map(concat(" + ", ".join(["memory"] * 60) + "), " + " + ".join(["toJSON(#)"] * 30) + ")"
    assert "The query builds more than 20,000,000 characters of strings" in str(error(wide))
    assert time.monotonic() - started < bounds.DEADLINE_SECONDS + 1


@pytest.mark.parametrize(
    "query",
    [
        "map(r, map(r, map(r, .i + 1)))",
        'map(join(r, r, "k", "k"), count(r, .i > 10))',
        'filter(join(r, r, "k", "k"), any(join(r, r, "i", "i"), .left_i == 299))',
    ],
)
def test_nested_work_over_a_300_row_relation_runs_out_of_steps_or_time(query):
    relations = {"r": [{"k": i % 2, "i": i} for i in range(300)]}
    started = time.monotonic()
    message = str(error(query, relations))
    assert "evaluation steps" in message or "seconds" in message
    assert time.monotonic() - started < bounds.DEADLINE_SECONDS + 1


def test_deadline(monkeypatch):
    monkeypatch.setattr(bounds, "DEADLINE_SECONDS", 0.05)
    monkeypatch.setattr(bounds, "MAX_STEPS", 10**9)
    relations = {"r": [{"i": i} for i in range(300)]}
    started = time.monotonic()
    assert "ran longer than 0.05 seconds" in str(error("map(r, map(r, map(r, .i + 1)))", relations))
    assert time.monotonic() - started < 1.0


def test_result_size_is_capped(monkeypatch):
    monkeypatch.setattr(bounds, "MAX_RESULT_SIZE", 10_000)
    big = {"memory": [{"key": str(i), "value": "x" * 1000} for i in range(20)]}
    assert run_query("memory", big, limit=5)["count"] == 20
    assert "characters of JSON" in str(error("memory", big))


# --- fuzzing --------------------------------------------------------------------------------------

FUZZ_RELATIONS = {
    "memory": MEMORY[:3],
    "tool_calls": TOOL_CALLS[:2],
    "tasks": TASKS,
}
TOKENS = [
    "memory", "tool_calls", "tasks", "x", "filter", "map", "join", "union", "concat", "count", "any",
    "all", "len", "sortBy", "split", "replace", "toJSON", "string", "first", "(", ")", "[", "]", "{",
    "}", ",", ":", ".", "?.", "?", "??", "|", "#", "#index", ".key", ".type", ".rounds", ".args",
    ".value", "==", "!=", "<", "<=", ">", ">=", "&&", "||", "!", "and", "or", "not", "in", "contains",
    "startsWith", "endsWith", "+", "-", "*", "/", "%", "**", "^", "0", "1", "-1", "2.5", ".5", "1e308",
    "9223372036854775807", '"error"', "'x'", '""', '"\\u00e9"', "`raw`", '"', "true", "false", "nil",
    "key:", '"key":', "//", "/*", "*/",
]  # fmt: skip


def run_bounded(query: str) -> None:
    """Either a JSON-serialisable result or a QueryError, within the deadline."""
    started = time.monotonic()
    try:
        result = run_query(query, FUZZ_RELATIONS, limit=20)
    except QueryError as err:
        assert str(err)
    else:
        assert set(result) == {"rows", "count", "truncated"} and len(result["rows"]) <= 20
        json.dumps(result, allow_nan=False)
    assert time.monotonic() - started < bounds.DEADLINE_SECONDS + 1.0


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.text(max_size=200))
def test_fuzz_random_text(query):
    run_bounded(query)


@FUZZ
@given(st.text(alphabet=string.printable, max_size=200))
def test_fuzz_printable_text(query):
    run_bounded(query)


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=40), st.sampled_from([" ", ""]))
def test_fuzz_token_soup(tokens, separator):
    run_bounded(separator.join(tokens))


def expressions() -> st.SearchStrategy[str]:
    """Untyped well-formed queries: any operator or function over any operands."""
    leaves = st.sampled_from(
        ["memory", "tasks", "tool_calls", "#", ".key", ".rounds", ".args", ".value", "1", "0", "-2.5", '"a"', "''",
         "true", "nil", "[]", "{}", "#index"]  # fmt: skip
    )

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        binary = st.sampled_from(["==", "!=", "<", "+", "-", "*", "/", "%", "**", "&&", "||", "in", "contains", "??"])
        functions = st.sampled_from(
            ["filter", "map", "count", "any", "sortBy", "union", "concat", "len", "string", "toJSON", "uniq", "sort", "first"]
        )
        return st.one_of(
            st.tuples(inner, binary, inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(functions, st.lists(inner, min_size=1, max_size=3)).map(lambda t: f"{t[0]}({', '.join(t[1])})"),
            st.tuples(inner, inner, inner).map(lambda t: f"join({t[0]}, {t[1]}, {t[2]}, 'key')"),
            st.tuples(inner, inner).map(lambda t: f"{t[0]}[{t[1]}]"),
            st.tuples(st.sampled_from(["-", "!", "not "]), inner).map("".join),
            st.lists(inner, max_size=3).map(lambda items: f"[{', '.join(items)}]"),
            st.tuples(inner, inner).map(lambda t: f"{{a: {t[0]}, 'b': {t[1]}}}"),
            st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
        )

    return st.recursive(leaves, extend, max_leaves=25)


@st.composite
def relational_queries(draw: st.DrawFn, depth: int = 4) -> str:
    """Queries shaped like real ones (relations in, predicates inside), so most get evaluated."""
    pick = lambda options: draw(st.sampled_from(options))  # noqa: E731

    def value(budget: int) -> str:
        leaf = [".key", ".type", ".rounds", ".value", ".args", ".note", ".references", ".left_key", "#", "#index",
                ".missing", '"error"', "'deploy'", "1", "2.5", "0", "-1", "true", "nil", '""', "[1, 'a']", "{k: 1}"]  # fmt: skip
        match draw(st.integers(0, 6 if budget else 0)):
            case 0:
                return pick(leaf)
            case 1:
                return f"{value(budget - 1)} {pick(['+', '-', '*', '/', '%', '??'])} {value(budget - 1)}"
            case 2:
                return f"{pick(['len', 'string', 'toJSON', 'upper', 'first', 'type', 'sum', 'int'])}({value(budget - 1)})"
            case 3:
                return value(budget - 1) + pick([".key", "[0]", "[-1]", "?.x", "[1:]", '["k"]'])
            case 4:
                return f"{{a: {value(budget - 1)}, b: {value(budget - 1)}}}"
            case 5:
                return f"({predicate(budget - 1)} ? {value(budget - 1)} : {value(budget - 1)})"
            case _:
                return f"count({relation(budget - 1)}, {predicate(budget - 1)})"

    def predicate(budget: int) -> str:
        compare = ["==", "!=", "<", ">=", "in", "not in", "contains", "startsWith", "endsWith"]
        match draw(st.integers(0, 4 if budget else 1)):
            case 0:
                return pick(["true", "false"])
            case 1:
                return f"{value(budget)} {pick(compare)} {value(budget)}"
            case 2:
                return f"({predicate(budget - 1)} {pick(['&&', '||', 'and', 'or'])} {predicate(budget - 1)})"
            case 3:
                return f"!({predicate(budget - 1)})"
            case _:
                return f"{pick(['any', 'all', 'none', 'one'])}({relation(budget - 1)}, {predicate(budget - 1)})"

    def relation(budget: int, top: bool = False) -> str:
        leaves = ["memory", "tasks", "tool_calls", "[]", "[1, 2, 2]"] + ([] if top else [".references"])
        names = ['"key"', '"name"', '"id"', '"type"', '"left_key"', '"references"']
        match draw(st.integers(0, 7 if budget else 0)):
            case 0:
                return pick(leaves)
            case 1:
                return f"filter({relation(budget - 1, top)}, {predicate(budget - 1)})"
            case 2:
                return f"map({relation(budget - 1, top)}, {value(budget - 1)})"
            case 3:
                return f"join({relation(budget - 1, top)}, {relation(budget - 1, top)}, {pick(names)}, {pick(names)})"
            case 4:
                return f"{pick(['union', 'concat'])}({relation(budget - 1, top)}, {relation(budget - 1, top)})"
            case 5:
                return f"sortBy({relation(budget - 1, top)}, {value(budget - 1)}, {pick(['asc', 'desc'])!r})"
            case 6:
                return f"{relation(budget - 1, top)} | filter({predicate(budget - 1)})"
            case _:
                return f"take({relation(budget - 1, top)}, {draw(st.integers(0, 3))})"

    if draw(st.booleans()):
        return relation(depth, top=True)
    return f"count({relation(depth - 1, top=True)}, {predicate(depth - 1)})"


@FUZZ
@given(expressions())
def test_fuzz_generated_expressions(query):
    run_bounded(query)


@FUZZ
@given(relational_queries())
def test_fuzz_relational_queries(query):
    run_bounded(query)
