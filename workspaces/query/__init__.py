"""The query language of the `memory_query` tool: select/project/join/union over agent state.

A query is one expression in the syntax of expr-lang (github.com/expr-lang/expr), evaluated
over named relations (lists of rows; a row is a dict with str keys). The view passes three:

    memory      key, value, namespace, type, references, createdAt, updatedAt
    tool_calls  name, args, result, timestamp
    tasks       id, desc, status, rounds, note

    filter(memory, .type == "error")                          select (WHERE)
    map(memory, {key: .key, value: .value})                   project (columns)
    join(tool_calls, memory, "name", "key")                   equi-join, left_/right_ prefixed
    union(filter(memory, .type == "error"), filter(memory, .type == "decision"))

`run_query(query, relations, limit)` parses the query with a real LALR grammar (lark), checks
it (names, functions, argument counts) and interprets the tree; there is no Python `eval`.
It returns ``{"rows": [...], "count": n, "truncated": bool}``: `count` is the number of rows
before the cap, `rows` the first `limit` of them (default 50, at most 500).

Language
--------
Literals: ``"double"`` and ``'single'`` quoted strings with Go escapes (``\\n \\t \\" \\\\ \\xHH
\\uHHHH \\UHHHHHHHH \\ooo``), raw ```backtick``` strings, ints (``42 0x2A 0o52 0b101010 1_000``),
floats (``0.5 .5 1e3``), ``true false nil``, arrays ``[1, 2]`` and maps ``{key: 1, "a b": 2}``;
``//`` and ``/* */`` comments.

Operators, loosest first (each level left-associative unless noted):

    |                       pipe: ``memory | filter(.type == "error")`` is ``filter(memory, ...)``
    ?:                      ternary (right-associative)
    || or                   short-circuit; both sides must be bools
    && and
    == != < <= > >= in contains startsWith endsWith  (and ``not in``, ``not contains`` ...)
    + -                     ``+`` also joins two strings
    * / %                   ``/`` always gives a float; ``%`` needs ints
    ! not - +               unary; ``not a == b`` is ``(not a) == b``, as in expr-lang
    ** ^                    power, a float (right-associative)
    ??                      nil coalescing: ``.note ?? ""``
    . ?. [i] [a:b]          member, optional member (nil stays nil to the end of the chain),
                            index (negative counts from the end), slice

Inside a predicate (the second argument of filter, map, count, any, all, none, one, find,
findIndex, findLast, findLastIndex, sortBy) ``#`` is the current element, ``.field`` is
``#.field`` and ``#index`` its position; braces may wrap a predicate: ``filter(tasks, {.rounds > 2})``.
A bare name is always a relation; an unknown name is an error listing the known ones.

Semantics follow expr-lang: ``==`` across types is false (1 == 1.0 is true; true != 1), ``<``
and friends compare two numbers or two strings and are an error otherwise (also for nil: use
``??`` to give a default); a missing map key reads as nil and reading a field of nil is an
error unless ``?.`` is used; ``in`` tests membership of an array (by ``==``) or a key of a
map, and is an error on a string (use ``contains``, which is for strings only, as are
``startsWith``/``endsWith``). Arithmetic is on 64-bit ints and finite floats: overflow, division
by zero and non-finite results are errors. There is no ``*`` on strings, no ``matches``
(regular expressions could run unbounded), no ``..`` ranges and no ``let``.

Functions (see `_BUILTINS`): filter map count any all none one find findIndex findLast
findLastIndex sortBy, join union concat, len first last take reverse sort uniq sum min max
mean keys values, lower upper trim trimPrefix trimSuffix split replace indexOf lastIndexOf
hasPrefix hasSuffix, string int float type toJSON abs ceil floor round.

Decisions
---------
* ``join(left, right, leftField, rightField)`` is an inner equi-join by ``==``; the merged row
  has every left field as ``left_<name>`` and every right field as ``right_<name>``. A row
  whose join field is missing or nil matches nothing (as SQL NULL). Rows come out in left
  order, then right order. With one or two arguments ``join`` is expr-lang's string join
  (``join(["a", "b"], ",")``).
* ``union(a, b, ...)`` is the relational (set) union: a's rows then b's, each distinct row
  (by ``==``) kept once, at its first place. ``concat(a, b, ...)`` keeps duplicates.
* The result is a relation. A top-level array gives one row per element (a map is the row
  itself, anything else becomes ``{"value": element}``); a map is a single row; ``nil`` is
  no rows; any other scalar is one row ``{"value": scalar}`` (so ``count(memory, .type ==
  "error")`` returns ``[{"value": 3}]``).

Errors
------
Everything the caller can cause raises `QueryError` (its text is a user-facing sentence):
`QuerySyntaxError` (the view's ``400``) carries the 1-based line and column and the sorted
human-readable list of what was expected there (kinds of token first, then literal tokens).
Time and size are bounded by the constants of workspaces.query.bounds.
"""

from __future__ import annotations

from typing import Any

from workspaces.query import (
    bounds,
    functions,  # noqa: F401  (registers the built-in functions)
)
from workspaces.query.bounds import DEFAULT_LIMIT, MAX_LIMIT, QueryError, QuerySyntaxError
from workspaces.query.engine import _BUILTINS, _Evaluator, _fail
from workspaces.query.syntax import _Call, _Name, _Node, _parse, _Pointer, _quoted

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "QueryError", "QuerySyntaxError", "run_query"]


# --- static checks -------------------------------------------------------------------------


def _check(node: _Node, relations: dict[str, list[dict]], in_predicate: bool) -> None:
    """Names, functions, argument counts and ``#``/``.field`` placement, before evaluating.

    Recursion is safe: `_check_depth` has already bounded the depth.
    """
    if isinstance(node, _Name):
        if node.name not in relations:
            known = ", ".join(sorted(relations)) or "none"
            hint = f'; inside a predicate write ".{node.name}" for a field of the current row'
            _fail(node, f"Unknown name {_quoted(node.name)}; the relations are: {known}{hint}")
        return
    if isinstance(node, _Pointer):
        if not in_predicate:
            _fail(
                node,
                'A field reference like ".type" or "#" can only be used inside a predicate, '
                'e.g. filter(memory, .type == "error")',
            )
        if node.name not in ("", "index"):
            _fail(node, f'Unknown "#{node.name}"; use "#" for the current element or "#index" for its position')
        return
    if isinstance(node, _Call):
        builtin = _BUILTINS.get(node.name)
        if builtin is None:
            if node.name in relations:
                _fail(node, f"{_quoted(node.name)} is a relation, not a function")
            _fail(node, f"Unknown function {node.name}(); the functions are: {', '.join(sorted(_BUILTINS))}")
        if len(node.args) not in builtin.arity:
            _fail(node, f"Wrong number of arguments ({len(node.args)}) to {node.name}(); it is called as {builtin.usage}")
        for position, arg in enumerate(node.args):
            _check(arg, relations, in_predicate or (builtin.predicate and position == 1))
        return
    for child in node.children():
        _check(child, relations, in_predicate)


# --- results -------------------------------------------------------------------------------


def _as_rows(value: Any) -> list[dict]:
    """The query's value as a relation (see the module docstring)."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return [item if isinstance(item, dict) else {"value": item} for item in value]
    return [{"value": value}]


def run_query(query: str, relations: dict[str, list[dict]], limit: int = DEFAULT_LIMIT) -> dict:
    """Run a memory_query expression over `relations`; ``{"rows", "count", "truncated"}``.

    Raises `QuerySyntaxError` when the query does not parse and `QueryError` for anything
    else the query causes (unknown names, type errors, bounds exceeded).
    """
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise QueryError(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}")
    if not isinstance(query, str):
        raise QueryError("The query must be a string")
    tree = _parse(query)
    _check(tree, relations, in_predicate=False)
    evaluator = _Evaluator(relations)
    try:
        rows = _as_rows(evaluator.eval(tree, None))
        shown = rows[:limit]
        evaluator.json_size(shown, tree, bounds.MAX_RESULT_SIZE)
    except RecursionError:  # a last guard: depths are bounded well below Python's limit
        raise QueryError("The query or its data is nested too deeply to evaluate") from None
    return {"rows": shown, "count": len(rows), "truncated": len(rows) > limit}
