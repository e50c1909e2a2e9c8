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
Time and size are bounded by the module constants below.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any, NoReturn

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "QueryError", "QuerySyntaxError", "run_query"]

DEFAULT_LIMIT = 50  # rows returned when the caller gives no limit
MAX_LIMIT = 500  # the most rows one call may return

# --- bounds: every way a query can cost time or memory is capped -------------------------
MAX_QUERY_LENGTH = 4_000  # characters of query text
MAX_NESTING = 64  # depth of the expression tree (parentheses, calls, unary chains, ...)
MAX_VALUE_DEPTH = 64  # nesting of a value compared, hashed or serialised (input JSON too)
MAX_STEPS = 1_000_000  # evaluation steps: one per node evaluated, plus per element handled
DEADLINE_SECONDS = 2.0  # wall clock for one evaluation, checked every CLOCK_CHECK_EVERY steps
CLOCK_CHECK_EVERY = 1_000  # steps between two looks at the clock
MAX_INTERMEDIATE_ROWS = 100_000  # elements of any array built (a join, a union, split, ...)
MAX_STRING_LENGTH = 1_000_000  # characters of any string built
MAX_ALLOCATED_CHARS = 20_000_000  # characters of all strings built by one query together
MAX_RESULT_SIZE = 5_000_000  # approximate JSON size of the rows returned
STRING_STEP_CHARS = 4_096  # a string operation costs one extra step per this many characters
INT_MIN, INT_MAX = -(2**63), 2**63 - 1  # ints are 64-bit, as in expr-lang


class QueryError(Exception):
    """A query that cannot run: bad names, wrong types, or a bound exceeded. str() is for the user."""


class QuerySyntaxError(QueryError):
    """A query that does not parse; `detail` (also str()) names the position and what was expected."""

    def __init__(self, detail: str, line: int, column: int, expected: list[str]) -> None:
        super().__init__(detail)
        self.detail = detail
        self.line = line
        self.column = column
        self.expected = expected


# --- syntax tree ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Node:
    line: int
    column: int

    def children(self) -> Iterable[_Node]:
        return ()

    def where(self) -> str:
        return f"(line {self.line}, column {self.column})"


@dataclass(frozen=True, slots=True)
class _Literal(_Node):
    value: Any


@dataclass(frozen=True, slots=True)
class _Array(_Node):
    items: tuple[_Node, ...]

    def children(self) -> Iterable[_Node]:
        return self.items


@dataclass(frozen=True, slots=True)
class _Map(_Node):
    pairs: tuple[tuple[str, _Node], ...]

    def children(self) -> Iterable[_Node]:
        return (value for _, value in self.pairs)


@dataclass(frozen=True, slots=True)
class _Name(_Node):
    name: str


@dataclass(frozen=True, slots=True)
class _Pointer(_Node):
    """``#`` (name ``""``), ``#index``; ``.field`` is a `_Member` of ``#``."""

    name: str


@dataclass(frozen=True, slots=True)
class _Member(_Node):
    obj: _Node
    key: _Node
    optional: bool  # ``?.`` here or earlier in the chain: a nil object gives nil

    def children(self) -> Iterable[_Node]:
        return (self.obj, self.key)


@dataclass(frozen=True, slots=True)
class _Slice(_Node):
    obj: _Node
    start: _Node | None
    stop: _Node | None

    def children(self) -> Iterable[_Node]:
        return (n for n in (self.obj, self.start, self.stop) if n is not None)


@dataclass(frozen=True, slots=True)
class _Unary(_Node):
    op: str  # "-", "+" or "!"
    operand: _Node

    def children(self) -> Iterable[_Node]:
        return (self.operand,)


@dataclass(frozen=True, slots=True)
class _Op:
    """One operator of a chain, with its own position for error messages."""

    symbol: str
    line: int
    column: int
    operand: _Node

    def where(self) -> str:
        return f"(line {self.line}, column {self.column})"


@dataclass(frozen=True, slots=True)
class _Chain(_Node):
    """``a op b op c`` at one precedence level, kept flat and folded from the left."""

    first: _Node
    rest: tuple[_Op, ...]

    def children(self) -> Iterable[_Node]:
        return (self.first, *(op.operand for op in self.rest))


@dataclass(frozen=True, slots=True)
class _Logical(_Node):
    conjunction: bool  # True for && / and, False for || / or
    operands: tuple[_Node, ...]

    def children(self) -> Iterable[_Node]:
        return self.operands


@dataclass(frozen=True, slots=True)
class _Coalesce(_Node):
    operands: tuple[_Node, ...]

    def children(self) -> Iterable[_Node]:
        return self.operands


@dataclass(frozen=True, slots=True)
class _Conditional(_Node):
    condition: _Node
    then: _Node
    otherwise: _Node

    def children(self) -> Iterable[_Node]:
        return (self.condition, self.then, self.otherwise)


@dataclass(frozen=True, slots=True)
class _Call(_Node):
    name: str
    args: tuple[_Node, ...]

    def children(self) -> Iterable[_Node]:
        return self.args


# --- grammar -------------------------------------------------------------------------------

_GRAMMAR = r"""
?start: pipe

?pipe: ternary
     | pipe "|" NAME "(" [args] ")"          -> pipe_call

?ternary: or_test
        | or_test "?" ternary ":" ternary    -> conditional

?or_test: and_test (_or and_test)*
?and_test: comparison (_and comparison)*
_or: "||" | "or"
_and: "&&" | "and"

?comparison: sum (comp_op sum)*
!comp_op: "==" | "!=" | "<" | "<=" | ">" | ">="
        | "in" | "contains" | "startsWith" | "endsWith"
        | "not" "in" | "not" "contains" | "not" "startsWith" | "not" "endsWith"

?sum: product (add_op product)*
!add_op: "+" | "-"
?product: unary (mul_op unary)*
!mul_op: "*" | "/" | "%"

?unary: power | sign | negation
!sign: ("-" | "+") unary
!negation: ("!" | "not") unary

?power: coalesce
      | coalesce pow_op unary                -> pow_expr
!pow_op: "**" | "^"

?coalesce: postfix ("??" coalesce_operand)*
?coalesce_operand: postfix | signed_operand
!signed_operand: ("-" | "+" | "!" | "not") coalesce_operand

?postfix: atom
        | postfix "." NAME                   -> member
        | postfix "?." NAME                  -> opt_member
        | postfix "[" pipe "]"               -> index
        | postfix "[" [pipe] ":" [pipe] "]"  -> slice

?atom: literal
     | NAME                                  -> name
     | NAME "(" [args] ")"                   -> call
     | POINTER                               -> pointer
     | "." NAME                              -> field
     | "(" pipe ")"
     | "{" pipe "}"
     | array
     | map

args: pipe ("," pipe)*
!literal: INT | FLOAT | STRING | "true" | "false" | "nil"
!array: "[" [pipe ("," pipe)* [","]] "]"
!map: "{" [pair ("," pair)* [","]] "}"
pair: (NAME | STRING) ":" pipe

NAME: /[A-Za-z_][A-Za-z0-9_]*/
POINTER: /#[A-Za-z_][A-Za-z0-9_]*|#/
INT: /0[xX][0-9a-fA-F](_?[0-9a-fA-F])*|0[oO][0-7](_?[0-7])*|0[bB][01](_?[01])*|[0-9](_?[0-9])*/
FLOAT.2: /([0-9](_?[0-9])*)?\.[0-9](_?[0-9])*([eE][+-]?[0-9]+)?|[0-9](_?[0-9])*[eE][+-]?[0-9]+/
STRING: /"([^"\\\n]|\\.)*"|'([^'\\\n]|\\.)*'|`[^`]*`/

%ignore /\s+/
%ignore /\/\/[^\n]*/
%ignore /\/\*([^*]|\*+[^*\/])*\*+\//
"""

# How an expected terminal is named in a syntax error; literal tokens are shown quoted.
_TERMINAL_KINDS = {
    "NAME": "a name",
    "INT": "a number",
    "FLOAT": "a number",
    "STRING": "a string",
    "POINTER": '"#"',
    "$END": "end of query",
}

_ESCAPE = re.compile(r"\\(?:([abfnrtv\\'\"])|x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|([0-7]{3})|(.))")
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_ESCAPES_SHOWN = [r"\n", r"\t", r"\r", r"\\", r"\"", r"\'", r"\xHH", r"\uHHHH", r"\UHHHHHHHH", r"\ooo"]


def _position(item: Any) -> tuple[int, int]:
    """The (line, column) of a lark token or one of our nodes."""
    return item.line, item.column


def _unescape(token: Token) -> str:
    """The value of a STRING token: backticks are raw, quotes take Go's escapes."""
    text = str(token)
    if text[0] == "`":
        return text[1:-1]

    def replace(match: re.Match[str]) -> str:
        simple, hex2, hex4, hex8, octal, bad = match.groups()
        if simple is not None:
            return _SIMPLE_ESCAPES.get(simple, simple)
        if bad is None:
            code = int(hex2 or hex4 or hex8 or "0", 16) if octal is None else int(octal, 8)
            if code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF:
                return chr(code)
        column = token.column + 1 + match.start()
        expected = sorted(_ESCAPES_SHOWN)
        raise QuerySyntaxError(
            f"Invalid escape sequence {_quoted(match.group(0))} at line {token.line}, column {column}; "
            f"expected one of: {', '.join(expected)}",
            token.line,
            column,
            expected,
        )

    return _ESCAPE.sub(replace, text[1:-1])


class _Builder(Transformer):
    """Turns each grammar reduction into a `_Node` while the LALR parser runs (no recursion)."""

    def literal(self, children: list[Token]) -> _Literal:
        token = children[0]
        line, column = _position(token)
        if token.type == "STRING":
            return _Literal(line, column, _unescape(token))
        if token.type == "INT":
            digits = token.replace("_", "")
            value = int(digits, 0) if digits[:2].lower() in ("0x", "0o", "0b") else int(digits, 10)
            if value > INT_MAX:
                raise QueryError(f"The number {_quoted(token)} is too large for a 64-bit int (line {line}, column {column})")
            return _Literal(line, column, value)
        if token.type == "FLOAT":
            number = float(token.replace("_", ""))
            if not math.isfinite(number):
                raise QueryError(f"The number {_quoted(token)} is out of range (line {line}, column {column})")
            return _Literal(line, column, number)
        return _Literal(line, column, {"true": True, "false": False, "nil": None}[str(token)])

    def array(self, children: list[Any]) -> _Array:
        line, column = _position(children[0])
        return _Array(line, column, tuple(c for c in children if isinstance(c, _Node)))

    def map(self, children: list[Any]) -> _Map:
        line, column = _position(children[0])
        return _Map(line, column, tuple(c for c in children if isinstance(c, tuple)))

    def pair(self, children: list[Any]) -> tuple[str, _Node]:
        key, value = children
        return (_unescape(key) if key.type == "STRING" else str(key)), value

    def args(self, children: list[_Node]) -> list[_Node]:
        return children

    def name(self, children: list[Token]) -> _Name:
        return _Name(*_position(children[0]), str(children[0]))

    def pointer(self, children: list[Token]) -> _Pointer:
        return _Pointer(*_position(children[0]), str(children[0])[1:])

    def field(self, children: list[Token]) -> _Member:
        line, column = _position(children[0])
        column = max(column - 1, 1)  # the dot before the name
        return _Member(line, column, _Pointer(line, column, ""), _Literal(line, column, str(children[0])), False)

    def call(self, children: list[Any]) -> _Call:
        name, args = children
        return _Call(*_position(name), str(name), tuple(args or ()))

    def pipe_call(self, children: list[Any]) -> _Call:
        left, name, args = children
        return _Call(*_position(name), str(name), (left, *(args or ())))

    def member(self, children: list[Any], optional: bool = False) -> _Member:
        obj, name = children
        chained = optional or (isinstance(obj, _Member) and obj.optional)
        return _Member(*_position(name), obj, _Literal(*_position(name), str(name)), chained)

    def opt_member(self, children: list[Any]) -> _Member:
        return self.member(children, optional=True)

    def index(self, children: list[Any]) -> _Member:
        obj, key = children
        return _Member(*_position(key), obj, key, isinstance(obj, _Member) and obj.optional)

    def slice(self, children: list[Any]) -> _Slice:
        obj, start, stop = children
        return _Slice(*_position(obj), obj, start, stop)

    def sign(self, children: list[Any]) -> _Unary:
        op, operand = children
        return _Unary(*_position(op), str(op), operand)

    def negation(self, children: list[Any]) -> _Unary:
        op, operand = children
        return _Unary(*_position(op), "!", operand)

    def signed_operand(self, children: list[Any]) -> _Unary:
        """A sign or negation right of ``??`` (``.n ?? -1``), which binds tighter than ``??``."""
        op, operand = children
        return _Unary(*_position(op), "!" if op in ("!", "not") else str(op), operand)

    def _operator(self, children: list[Token]) -> tuple[str, int, int]:
        return " ".join(children), *_position(children[0])

    comp_op = add_op = mul_op = pow_op = _operator

    def _chain(self, children: list[Any]) -> _Chain:
        first, rest = children[0], children[1:]
        ops = tuple(_Op(symbol, line, column, operand) for (symbol, line, column), operand in zip(rest[::2], rest[1::2]))
        return _Chain(*_position(first), first, ops)

    comparison = sum = product = pow_expr = _chain

    def or_test(self, children: list[_Node]) -> _Logical:
        return _Logical(*_position(children[0]), False, tuple(children))

    def and_test(self, children: list[_Node]) -> _Logical:
        return _Logical(*_position(children[0]), True, tuple(children))

    def coalesce(self, children: list[_Node]) -> _Coalesce:
        return _Coalesce(*_position(children[0]), tuple(children))

    def conditional(self, children: list[_Node]) -> _Conditional:
        return _Conditional(*_position(children[0]), *children)


@cache
def _parser() -> Lark:
    """The LALR parser, built once; it builds `_Node`s as it reduces."""
    return Lark(_GRAMMAR, parser="lalr", lexer="contextual", transformer=_Builder(), maybe_placeholders=True)


def _quoted(text: str) -> str:
    """A token as the user typed it, quoted for a message (and shortened when long)."""
    if len(text) > 24:
        text = text[:20] + "..."
    text = text.replace("\n", "\\n").replace("\t", "\\t")
    return f"'{text}'" if '"' in text and "'" not in text else f'"{text}"'


def _describe_expected(parser: Lark, names: Iterable[str]) -> list[str]:
    """Terminal names as a sorted, de-duplicated list: kinds of token first, then literal tokens."""
    described = set()
    for name in names:
        if name in _TERMINAL_KINDS:
            described.add(_TERMINAL_KINDS[name])
            continue
        try:
            pattern = parser.get_terminal(name).pattern
        except KeyError:
            continue
        if pattern.type == "str":
            described.add(json.dumps(pattern.value))
    return sorted(described, key=lambda d: (d.startswith('"'), d))


def _end_position(query: str) -> tuple[int, int]:
    """The line and column just after the last character of the query."""
    last_line = query.rsplit("\n", 1)[-1]
    return query.count("\n") + 1, len(last_line) + 1


def _accepted_before(parser: Lark, query: str, position: int | None) -> set[str]:
    """The terminals the parser would take just before character `position` (None: the end).

    Re-parses the good prefix instead of asking the failed parser: by the time LALR rejects a
    token it may already have made reductions for it, which would hide valid continuations
    (after ``"x" + 1`` a ``*`` is still possible even though ``]`` was what failed).
    """
    interactive = parser.parse_interactive(query)
    try:
        for token in interactive.lexer_thread.lex(interactive.parser_state):
            if position is not None and token.start_pos >= position:
                break
            interactive.feed_token(token)
    except (UnexpectedInput, QueryError):
        pass  # the bad character itself, or a literal the builder refused: the state is as far as it gets
    return interactive.accepts()


def _syntax_error(parser: Lark, query: str, error: UnexpectedInput) -> QuerySyntaxError:
    """Our `QuerySyntaxError` for lark's complaint: where, what was found, and what would fit."""
    position = error.pos_in_stream
    if isinstance(error, UnexpectedCharacters):
        line, column = error.line, error.column
        char = query[position]
        if char in "\"'`":
            detail = f"Unterminated string starting at line {line}, column {column}; expected a closing {_quoted(char)}"
            return QuerySyntaxError(detail, line, column, [f"a closing {_quoted(char)}"])
        found = f"character {_quoted(char)}"
    elif isinstance(error, UnexpectedToken) and error.token.type == "$END":
        line, column = _end_position(query)
        found, position = "end of query", None
    else:
        line, column = error.line, error.column
        found = _quoted(str(error.token))
    expected = _describe_expected(parser, _accepted_before(parser, query, position))
    detail = f"Unexpected {found} at line {line}, column {column}"
    if expected:
        detail += "; expected one of: " + ", ".join(expected)
    return QuerySyntaxError(detail, line, column, expected)


def _parse(query: str) -> _Node:
    """The syntax tree of a query, or `QuerySyntaxError`/`QueryError`."""
    if len(query) > MAX_QUERY_LENGTH:
        raise QueryError(f"The query is {len(query):,} characters long; the limit is {MAX_QUERY_LENGTH:,}")
    parser = _parser()
    try:
        tree = parser.parse(query)
    except UnexpectedInput as error:
        raise _syntax_error(parser, query, error) from None
    _check_depth(tree)
    return tree


def _check_depth(root: _Node) -> None:
    """Refuse trees deeper than MAX_NESTING before anything recurses over them (iteratively)."""
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            raise QueryError(f"The query nests more than {MAX_NESTING} levels deep {node.where()}")
        stack.extend((child, depth + 1) for child in node.children())


# --- values --------------------------------------------------------------------------------


def _type_name(value: Any) -> str:
    """expr-lang's name for a value's type."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "map"
    return type(value).__name__


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _fail(where: _Node | _Op, message: str) -> NoReturn:
    raise QueryError(f"{message} {where.where()}")


def _nil_hint(*values: Any) -> str:
    return "; a value is nil (a missing field?): give it a default with ??" if None in values else ""


# --- evaluation ----------------------------------------------------------------------------

_Scope = tuple[Any, int] | None  # the current element of a predicate and its index


class _Evaluator:
    """Walks the tree once per query, charging every step against the budgets."""

    def __init__(self, relations: dict[str, list[dict]]) -> None:
        self.relations = relations
        self.steps = 0
        self.next_check = CLOCK_CHECK_EVERY
        self.deadline = time.monotonic() + DEADLINE_SECONDS
        self.allocated = 0

    # budgets

    def charge(self, steps: int) -> None:
        """Count `steps` of work; past the step budget or the deadline, stop the query."""
        self.steps += steps
        if self.steps >= self.next_check:
            self._checkpoint()

    def _checkpoint(self) -> None:
        if self.steps > MAX_STEPS:
            raise QueryError(
                f"The query needs more than {MAX_STEPS:,} evaluation steps; filter before join() or map() to narrow it"
            )
        if time.monotonic() > self.deadline:
            raise QueryError(f"The query ran longer than {DEADLINE_SECONDS:g} seconds and was stopped")
        self.next_check = min(self.steps + CLOCK_CHECK_EVERY, MAX_STEPS + 1)

    def charge_chars(self, length: int) -> None:
        """A string operation over `length` characters costs extra steps when the string is long."""
        if length >= STRING_STEP_CHARS:
            self.charge(length // STRING_STEP_CHARS)

    def new_string(self, where: _Node | _Op, length: int) -> None:
        """Account for a string of `length` characters about to be built."""
        if length > MAX_STRING_LENGTH:
            _fail(where, f"A string of {length:,} characters would be built; the limit is {MAX_STRING_LENGTH:,}")
        self.allocated += length
        if self.allocated > MAX_ALLOCATED_CHARS:
            _fail(where, f"The query builds more than {MAX_ALLOCATED_CHARS:,} characters of strings")
        self.charge_chars(length)

    def new_array(self, where: _Node | _Op, length: int) -> None:
        """Account for an array of `length` elements about to be built."""
        if length > MAX_INTERMEDIATE_ROWS:
            _fail(where, f"An array of {length:,} elements would be built; the limit is {MAX_INTERMEDIATE_ROWS:,}")
        self.charge(length)

    # values

    def equal(self, a: Any, b: Any, depth: int = 0) -> bool:
        """expr-lang's ``==``: numbers by value, other types only with their own kind, deeply."""
        if a is None or b is None:
            return a is b
        if isinstance(a, bool) or isinstance(b, bool):
            return isinstance(a, bool) and isinstance(b, bool) and a == b
        if _is_number(a):
            return _is_number(b) and a == b
        if isinstance(a, str):
            return isinstance(b, str) and a == b
        if depth >= MAX_VALUE_DEPTH:
            raise QueryError(f"A value is nested more than {MAX_VALUE_DEPTH} levels deep to compare")
        if isinstance(a, list):
            if not isinstance(b, list) or len(a) != len(b):
                return False
            self.charge(len(a))
            return all(self.equal(x, y, depth + 1) for x, y in zip(a, b))
        if isinstance(a, dict):
            if not isinstance(b, dict) or a.keys() != b.keys():
                return False
            self.charge(len(a))
            return all(self.equal(value, b[key], depth + 1) for key, value in a.items())
        return a == b

    def canonical(self, value: Any, depth: int = 0) -> Any:
        """A hashable stand-in with the same equality as `equal` (for join keys and union)."""
        if value is None:
            return ("nil",)
        if isinstance(value, bool):
            return ("bool", value)
        if _is_number(value):
            return ("number", value)
        if isinstance(value, str):
            return ("string", value)
        if depth >= MAX_VALUE_DEPTH:
            raise QueryError(f"A value is nested more than {MAX_VALUE_DEPTH} levels deep to compare")
        if isinstance(value, list):
            self.charge(len(value))
            return ("array", tuple(self.canonical(item, depth + 1) for item in value))
        if isinstance(value, dict):
            self.charge(len(value))
            return ("map", frozenset((key, self.canonical(item, depth + 1)) for key, item in value.items()))
        return ("other", repr(value))

    def json_size(self, value: Any, where: _Node | _Op, limit: int) -> int:
        """An estimate of `value`'s JSON size, failing once it passes `limit` (iterative)."""
        size = 0
        stack = [(value, 0)]
        while stack:
            item, depth = stack.pop()
            if isinstance(item, str):
                size += len(item) + 2
            elif isinstance(item, (list, dict)):
                if depth >= MAX_VALUE_DEPTH:
                    _fail(where, f"A value is nested more than {MAX_VALUE_DEPTH} levels deep")
                size += 2 + len(item)
                self.charge(len(item))
                if isinstance(item, dict):
                    size += sum(len(key) + 3 for key in item)
                    stack.extend((child, depth + 1) for child in item.values())
                else:
                    stack.extend((child, depth + 1) for child in item)
            else:
                size += 8
            if size > limit:
                _fail(where, f"A value of more than {limit:,} characters of JSON would be built")
        return size

    def to_json(self, value: Any, where: _Node | _Op) -> str:
        self.json_size(value, where, MAX_STRING_LENGTH)
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as error:
            _fail(where, f"The value cannot be written as JSON ({error})")
        self.new_string(where, len(text))
        return text

    # tree walking

    def eval(self, node: _Node, scope: _Scope) -> Any:
        self.steps += 1
        if self.steps >= self.next_check:
            self._checkpoint()
        return _EVALUATORS[type(node)](self, node, scope)

    def truth(self, value: Any, where: _Node | _Op, what: str) -> bool:
        if not isinstance(value, bool):
            _fail(where, f"{what} must be true or false, got {_type_name(value)}{_nil_hint(value)}")
        return value

    def _literal(self, node: _Literal, scope: _Scope) -> Any:
        return node.value

    def _array(self, node: _Array, scope: _Scope) -> list[Any]:
        return [self.eval(item, scope) for item in node.items]

    def _map(self, node: _Map, scope: _Scope) -> dict[str, Any]:
        return {key: self.eval(value, scope) for key, value in node.pairs}

    def _name(self, node: _Name, scope: _Scope) -> Any:
        return self.relations[node.name]

    def _pointer(self, node: _Pointer, scope: _Scope) -> Any:
        assert scope is not None  # the static check allows pointers only inside predicates
        return scope[0] if node.name == "" else scope[1]

    def _member(self, node: _Member, scope: _Scope) -> Any:
        obj = self.eval(node.obj, scope)
        key = self.eval(node.key, scope)
        if obj is None:
            if node.optional:
                return None
            _fail(node, f"Cannot read {_quoted(str(key))} of nil; use ?. to allow a missing value")
        if isinstance(obj, dict):
            if not isinstance(key, str):
                _fail(node, f"A map key must be a string, got {_type_name(key)}")
            return obj.get(key)
        if isinstance(obj, (list, str)):
            if not isinstance(key, int) or isinstance(key, bool):
                hint = ""
                if isinstance(obj, list) and isinstance(key, str):
                    hint = f"; to read a field of every row use map(..., .{key})"
                got = f"{_type_name(key)} {_quoted(str(key))}"
                _fail(node, f"An index into {_type_name(obj)} must be an int, got {got}{hint}")
            if not -len(obj) <= key < len(obj):
                _fail(node, f"Index {key} is out of range for {_type_name(obj)} of length {len(obj)}")
            return obj[key]
        _fail(node, f"Cannot read {_quoted(str(key))} of {_type_name(obj)}")

    def _slice(self, node: _Slice, scope: _Scope) -> Any:
        obj = self.eval(node.obj, scope)
        bounds = [None if n is None else self.eval(n, scope) for n in (node.start, node.stop)]
        if not isinstance(obj, (list, str)):
            _fail(node, f"Cannot slice {_type_name(obj)}")
        if any(b is not None and (not isinstance(b, int) or isinstance(b, bool)) for b in bounds):
            _fail(node, "Slice bounds must be ints")
        result = obj[bounds[0] : bounds[1]]
        self.charge(len(result) if isinstance(result, list) else len(result) // STRING_STEP_CHARS)
        return result

    def _unary(self, node: _Unary, scope: _Scope) -> Any:
        value = self.eval(node.operand, scope)
        if node.op == "!":
            return not self.truth(value, node, 'The operand of "!"/"not"')
        if not _is_number(value):
            _fail(node, f'Unary "{node.op}" needs a number, got {_type_name(value)}{_nil_hint(value)}')
        return _checked_number(node, -value if node.op == "-" else value)

    def _chain(self, node: _Chain, scope: _Scope) -> Any:
        result = self.eval(node.first, scope)
        for op in node.rest:
            result = _BINARY[op.symbol](self, op, result, self.eval(op.operand, scope))
        return result

    def _logical(self, node: _Logical, scope: _Scope) -> bool:
        # && stops at the first false, || at the first true
        stop_at = not node.conjunction
        for operand in node.operands:
            value = self.eval(operand, scope)
            if not isinstance(value, bool):
                symbol = "&&/and" if node.conjunction else "||/or"
                _fail(operand, f"The operands of {symbol} must be true or false, got {_type_name(value)}{_nil_hint(value)}")
            if value is stop_at:
                return value
        return not stop_at

    def _coalesce(self, node: _Coalesce, scope: _Scope) -> Any:
        value = None
        for operand in node.operands:
            value = self.eval(operand, scope)
            if value is not None:
                return value
        return value

    def _conditional(self, node: _Conditional, scope: _Scope) -> Any:
        condition = self.truth(self.eval(node.condition, scope), node, "The condition of ?:")
        return self.eval(node.then if condition else node.otherwise, scope)

    def _call(self, node: _Call, scope: _Scope) -> Any:
        builtin = _BUILTINS[node.name]
        if builtin.predicate:
            return builtin.impl(self, node, scope)
        return builtin.impl(self, node, [self.eval(arg, scope) for arg in node.args])


_EVALUATORS: dict[type[_Node], Callable[[_Evaluator, Any, _Scope], Any]] = {
    _Literal: _Evaluator._literal,
    _Array: _Evaluator._array,
    _Map: _Evaluator._map,
    _Name: _Evaluator._name,
    _Pointer: _Evaluator._pointer,
    _Member: _Evaluator._member,
    _Slice: _Evaluator._slice,
    _Unary: _Evaluator._unary,
    _Chain: _Evaluator._chain,
    _Logical: _Evaluator._logical,
    _Coalesce: _Evaluator._coalesce,
    _Conditional: _Evaluator._conditional,
    _Call: _Evaluator._call,
}


# --- operators -----------------------------------------------------------------------------


def _checked_number(where: _Node | _Op, value: int | float) -> int | float:
    """Refuse ints outside 64 bits and floats that are infinite or NaN."""
    if isinstance(value, int):
        if not INT_MIN <= value <= INT_MAX:
            _fail(where, "Integer overflow: the result does not fit in 64 bits")
    elif not math.isfinite(value):
        _fail(where, "The result is not a finite number")
    return value


def _mismatch(op: _Op, a: Any, b: Any) -> NoReturn:
    _fail(op, f'Operator "{op.symbol}" is not defined on {_type_name(a)} and {_type_name(b)}{_nil_hint(a, b)}')


def _op_equal(ev: _Evaluator, op: _Op, a: Any, b: Any) -> bool:
    return ev.equal(a, b)


def _op_not_equal(ev: _Evaluator, op: _Op, a: Any, b: Any) -> bool:
    return not ev.equal(a, b)


def _ordering(compare: Callable[[Any, Any], bool]) -> Callable[[_Evaluator, _Op, Any, Any], bool]:
    def apply(ev: _Evaluator, op: _Op, a: Any, b: Any) -> bool:
        if (_is_number(a) and _is_number(b)) or (isinstance(a, str) and isinstance(b, str)):
            return compare(a, b)
        _mismatch(op, a, b)

    return apply


def _op_in(ev: _Evaluator, op: _Op, needle: Any, haystack: Any) -> bool:
    if haystack is None:
        return False
    if isinstance(haystack, list):
        for item in haystack:
            ev.charge(1)
            if ev.equal(needle, item):
                return True
        return False
    if isinstance(haystack, dict):
        if not isinstance(needle, str):
            _fail(op, f"Cannot look up a key of type {_type_name(needle)} in a map (keys are strings)")
        return needle in haystack
    if isinstance(haystack, str):
        _fail(op, 'Operator "in" is not defined on a string; use contains to find a substring')
    _mismatch(op, needle, haystack)


def _op_not_in(ev: _Evaluator, op: _Op, needle: Any, haystack: Any) -> bool:
    return not _op_in(ev, op, needle, haystack)


def _string_test(test: Callable[[str, str], bool], negate: bool) -> Callable[[_Evaluator, _Op, Any, Any], bool]:
    def apply(ev: _Evaluator, op: _Op, a: Any, b: Any) -> bool:
        if not (isinstance(a, str) and isinstance(b, str)):
            _mismatch(op, a, b)
        ev.charge_chars(len(a))
        return test(a, b) is not negate

    return apply


def _op_add(ev: _Evaluator, op: _Op, a: Any, b: Any) -> Any:
    if _is_number(a) and _is_number(b):
        return _checked_number(op, a + b)
    if isinstance(a, str) and isinstance(b, str):
        ev.new_string(op, len(a) + len(b))
        return a + b
    if isinstance(a, list) and isinstance(b, list):
        _fail(op, 'Operator "+" does not join arrays; use concat(a, b) or union(a, b)')
    _mismatch(op, a, b)


def _arithmetic(compute: Callable[[Any, Any], Any]) -> Callable[[_Evaluator, _Op, Any, Any], Any]:
    def apply(ev: _Evaluator, op: _Op, a: Any, b: Any) -> Any:
        if not (_is_number(a) and _is_number(b)):
            _mismatch(op, a, b)
        return _checked_number(op, compute(a, b))

    return apply


def _op_divide(ev: _Evaluator, op: _Op, a: Any, b: Any) -> float:
    if not (_is_number(a) and _is_number(b)):
        _mismatch(op, a, b)
    if b == 0:
        _fail(op, "Division by zero")
    return _checked_number(op, a / b)


def _op_modulo(ev: _Evaluator, op: _Op, a: Any, b: Any) -> int:
    if not (isinstance(a, int) and isinstance(b, int)) or isinstance(a, bool) or isinstance(b, bool):
        _mismatch(op, a, b)
    if b == 0:
        _fail(op, "Modulo by zero")
    remainder = abs(a) % abs(b)  # Go's %: the sign follows the dividend
    return -remainder if a < 0 else remainder


def _op_power(ev: _Evaluator, op: _Op, a: Any, b: Any) -> float:
    if not (_is_number(a) and _is_number(b)):
        _mismatch(op, a, b)
    try:
        result = float(a) ** float(b)
    except (OverflowError, ZeroDivisionError):
        _fail(op, "The power is out of range")
    if isinstance(result, complex):
        _fail(op, "The power of a negative number to a fractional exponent is not a real number")
    return _checked_number(op, result)


_BINARY: dict[str, Callable[[_Evaluator, _Op, Any, Any], Any]] = {
    "==": _op_equal,
    "!=": _op_not_equal,
    "<": _ordering(lambda a, b: a < b),
    "<=": _ordering(lambda a, b: a <= b),
    ">": _ordering(lambda a, b: a > b),
    ">=": _ordering(lambda a, b: a >= b),
    "in": _op_in,
    "not in": _op_not_in,
    "contains": _string_test(lambda a, b: b in a, False),
    "not contains": _string_test(lambda a, b: b in a, True),
    "startsWith": _string_test(str.startswith, False),
    "not startsWith": _string_test(str.startswith, True),
    "endsWith": _string_test(str.endswith, False),
    "not endsWith": _string_test(str.endswith, True),
    "+": _op_add,
    "-": _arithmetic(lambda a, b: a - b),
    "*": _arithmetic(lambda a, b: a * b),
    "/": _op_divide,
    "%": _op_modulo,
    "**": _op_power,
    "^": _op_power,
}


# --- functions -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Builtin:
    """A function a query may call.

    A predicate function gets the unevaluated arguments (`impl(ev, call, scope)`) and runs its
    second argument once per element; any other gets the evaluated values (`impl(ev, call, values)`).
    """

    usage: str
    arity: Container[int]
    predicate: bool
    impl: Callable[..., Any]


_BUILTINS: dict[str, _Builtin] = {}


def _builtin(usage: str, arity: Container[int], *, predicate: bool = False) -> Callable[[Callable], Callable]:
    def register(impl: Callable) -> Callable:
        _BUILTINS[usage.split("(")[0]] = _Builtin(usage, arity, predicate, impl)
        return impl

    return register


def _arg_error(call: _Call, position: int, wanted: str, value: Any) -> NoReturn:
    _fail(call, f"{call.name}() needs {wanted} as argument {position}, got {_type_name(value)}{_nil_hint(value)}")


def _array_arg(call: _Call, position: int, value: Any) -> list[Any]:
    if not isinstance(value, list):
        _arg_error(call, position, "an array", value)
    return value


def _string_arg(call: _Call, position: int, value: Any) -> str:
    if not isinstance(value, str):
        _arg_error(call, position, "a string", value)
    return value


def _int_arg(call: _Call, position: int, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        _arg_error(call, position, "an int", value)
    return value


def _number_arg(call: _Call, position: int, value: Any) -> int | float:
    if not _is_number(value):
        _arg_error(call, position, "a number", value)
    return value


def _each(ev: _Evaluator, call: _Call, scope: _Scope) -> Iterable[tuple[int, Any, Any]]:
    """(index, element, predicate value) for the elements of a predicate function's array."""
    items = _array_arg(call, 1, ev.eval(call.args[0], scope))
    predicate = call.args[1]
    for index, item in enumerate(items):
        yield index, item, ev.eval(predicate, (item, index))


def _tests(ev: _Evaluator, call: _Call, scope: _Scope) -> Iterable[tuple[int, Any, bool]]:
    for index, item, value in _each(ev, call, scope):
        yield index, item, ev.truth(value, call, f"The predicate of {call.name}()")


@_builtin("filter(array, predicate)", {2}, predicate=True)
def _filter(ev: _Evaluator, call: _Call, scope: _Scope) -> list[Any]:
    return [item for _, item, keep in _tests(ev, call, scope) if keep]


@_builtin("map(array, predicate)", {2}, predicate=True)
def _map(ev: _Evaluator, call: _Call, scope: _Scope) -> list[Any]:
    return [value for _, _, value in _each(ev, call, scope)]


@_builtin("count(array, predicate)", {2}, predicate=True)
def _count(ev: _Evaluator, call: _Call, scope: _Scope) -> int:
    return sum(1 for _, _, hit in _tests(ev, call, scope) if hit)


@_builtin("any(array, predicate)", {2}, predicate=True)
def _any(ev: _Evaluator, call: _Call, scope: _Scope) -> bool:
    return any(hit for _, _, hit in _tests(ev, call, scope))


@_builtin("all(array, predicate)", {2}, predicate=True)
def _all(ev: _Evaluator, call: _Call, scope: _Scope) -> bool:
    return all(hit for _, _, hit in _tests(ev, call, scope))


@_builtin("none(array, predicate)", {2}, predicate=True)
def _none(ev: _Evaluator, call: _Call, scope: _Scope) -> bool:
    return not any(hit for _, _, hit in _tests(ev, call, scope))


@_builtin("one(array, predicate)", {2}, predicate=True)
def _one(ev: _Evaluator, call: _Call, scope: _Scope) -> bool:
    return sum(1 for _, _, hit in _tests(ev, call, scope) if hit) == 1


@_builtin("find(array, predicate)", {2}, predicate=True)
def _find(ev: _Evaluator, call: _Call, scope: _Scope) -> Any:
    return next((item for _, item, hit in _tests(ev, call, scope) if hit), None)


@_builtin("findIndex(array, predicate)", {2}, predicate=True)
def _find_index(ev: _Evaluator, call: _Call, scope: _Scope) -> int:
    return next((index for index, _, hit in _tests(ev, call, scope) if hit), -1)


@_builtin("findLast(array, predicate)", {2}, predicate=True)
def _find_last(ev: _Evaluator, call: _Call, scope: _Scope) -> Any:
    found = None
    for _, item, hit in _tests(ev, call, scope):
        if hit:
            found = item
    return found


@_builtin("findLastIndex(array, predicate)", {2}, predicate=True)
def _find_last_index(ev: _Evaluator, call: _Call, scope: _Scope) -> int:
    found = -1
    for index, _, hit in _tests(ev, call, scope):
        if hit:
            found = index
    return found


def _sort_order(call: _Call, position: int, value: Any) -> bool:
    """True for descending; the order argument is "asc" or "desc"."""
    if value not in ("asc", "desc"):
        _fail(call, f'{call.name}() takes "asc" or "desc" as argument {position}')
    return value == "desc"


def _sorted(ev: _Evaluator, call: _Call, items: list[Any], keys: list[Any], descending: bool) -> list[Any]:
    """`items` ordered by `keys`: all numbers or all strings; nil keys go last in either order."""
    present = [i for i, key in enumerate(keys) if key is not None]
    kinds = {"number" if _is_number(keys[i]) else _type_name(keys[i]) for i in present}
    if len(kinds) > 1 or kinds - {"number", "string"}:
        _fail(call, f"{call.name}() can only order numbers or strings, not {', '.join(sorted(kinds))}")
    ev.charge(len(items) * max(1, len(items).bit_length()))
    present.sort(key=keys.__getitem__, reverse=descending)
    return [items[i] for i in present] + [items[i] for i, key in enumerate(keys) if key is None]


@_builtin('sortBy(array, predicate[, "asc"|"desc"])', {2, 3}, predicate=True)
def _sort_by(ev: _Evaluator, call: _Call, scope: _Scope) -> list[Any]:
    descending = len(call.args) == 3 and _sort_order(call, 3, ev.eval(call.args[2], scope))
    key_node = call.args[1]
    if isinstance(key_node, _Literal) and isinstance(key_node.value, str):  # sortBy(users, "Age")
        items = _array_arg(call, 1, ev.eval(call.args[0], scope))
        keys = [item.get(key_node.value) if isinstance(item, dict) else None for item in items]
    else:
        pairs = [(item, key) for _, item, key in _each(ev, call, scope)]
        items, keys = [item for item, _ in pairs], [key for _, key in pairs]
    return _sorted(ev, call, items, keys, descending)


@_builtin("join(left, right, leftField, rightField) or join(array[, separator])", {1, 2, 4})
def _join(ev: _Evaluator, call: _Call, args: list[Any]) -> Any:
    if len(args) < 4:
        return _join_strings(ev, call, args)
    left, right = _array_arg(call, 1, args[0]), _array_arg(call, 2, args[1])
    left_field, right_field = _string_arg(call, 3, args[2]), _string_arg(call, 4, args[3])
    buckets: dict[Any, list[dict]] = {}
    for position, row in enumerate(right, 1):
        if not isinstance(row, dict):
            _fail(call, f"join() needs rows (maps); row {position} of the right relation is {_type_name(row)}")
        key = row.get(right_field)
        if key is not None:
            buckets.setdefault(ev.canonical(key), []).append(row)
    ev.charge(len(right))
    matches: list[tuple[dict, list[dict]]] = []
    total = 0
    for position, row in enumerate(left, 1):
        if not isinstance(row, dict):
            _fail(call, f"join() needs rows (maps); row {position} of the left relation is {_type_name(row)}")
        key = row.get(left_field)
        partners = buckets.get(ev.canonical(key), []) if key is not None else []
        if partners:
            matches.append((row, partners))
            total += len(partners)
    ev.charge(len(left))
    if total > MAX_INTERMEDIATE_ROWS:
        _fail(call, f"The join would produce {total:,} rows; the limit is {MAX_INTERMEDIATE_ROWS:,}: filter its inputs first")
    result = []
    for row, partners in matches:
        prefixed = {f"left_{name}": value for name, value in row.items()}
        for partner in partners:
            ev.charge(1 + len(row) + len(partner))
            merged = dict(prefixed)
            merged.update((f"right_{name}", value) for name, value in partner.items())
            result.append(merged)
    return result


def _join_strings(ev: _Evaluator, call: _Call, args: list[Any]) -> str:
    parts = _array_arg(call, 1, args[0])
    separator = _string_arg(call, 2, args[1]) if len(args) == 2 else ""
    for part in parts:
        if not isinstance(part, str):
            _fail(call, f"join(array, separator) joins strings, found {_type_name(part)}")
    ev.new_string(call, sum(map(len, parts)) + len(separator) * max(len(parts) - 1, 0))
    return separator.join(parts)


@_builtin("union(a, b, ...)", range(2, 65))
def _union(ev: _Evaluator, call: _Call, args: list[Any]) -> list[Any]:
    seen: set[Any] = set()
    result = []
    for position, relation in enumerate(args, 1):
        for item in _array_arg(call, position, relation):
            key = ev.canonical(item)
            if key not in seen:
                seen.add(key)
                result.append(item)
        ev.new_array(call, len(result))
    return result


@_builtin("concat(a, b, ...)", range(1, 65))
def _concat(ev: _Evaluator, call: _Call, args: list[Any]) -> list[Any]:
    arrays = [_array_arg(call, position, value) for position, value in enumerate(args, 1)]
    ev.new_array(call, sum(map(len, arrays)))
    return [item for array in arrays for item in array]


@_builtin("len(value)", {1})
def _len(ev: _Evaluator, call: _Call, args: list[Any]) -> int:
    if not isinstance(args[0], (str, list, dict)):
        _arg_error(call, 1, "a string, array or map", args[0])
    return len(args[0])


@_builtin("first(array)", {1})
def _first(ev: _Evaluator, call: _Call, args: list[Any]) -> Any:
    items = _array_arg(call, 1, args[0])
    return items[0] if items else None


@_builtin("last(array)", {1})
def _last(ev: _Evaluator, call: _Call, args: list[Any]) -> Any:
    items = _array_arg(call, 1, args[0])
    return items[-1] if items else None


@_builtin("take(array, n)", {2})
def _take(ev: _Evaluator, call: _Call, args: list[Any]) -> list[Any]:
    items, count = _array_arg(call, 1, args[0]), _int_arg(call, 2, args[1])
    if count < 0:
        _fail(call, "take() needs a count of 0 or more")
    ev.charge(min(count, len(items)))
    return items[:count]


@_builtin("reverse(array)", {1})
def _reverse(ev: _Evaluator, call: _Call, args: list[Any]) -> list[Any]:
    items = _array_arg(call, 1, args[0])
    ev.charge(len(items))
    return items[::-1]


@_builtin('sort(array[, "asc"|"desc"])', {1, 2})
def _sort(ev: _Evaluator, call: _Call, args: list[Any]) -> list[Any]:
    items = _array_arg(call, 1, args[0])
    descending = len(args) == 2 and _sort_order(call, 2, args[1])
    return _sorted(ev, call, items, items, descending)


@_builtin("uniq(array)", {1})
def _uniq(ev: _Evaluator, call: _Call, args: list[Any]) -> list[Any]:
    return _union(ev, call, [_array_arg(call, 1, args[0]), []])


def _numbers(ev: _Evaluator, call: _Call, args: list[Any]) -> list[int | float]:
    values = args[0] if len(args) == 1 and isinstance(args[0], list) else args
    ev.charge(len(values))
    for value in values:
        if not _is_number(value):
            _fail(call, f"{call.name}() works on numbers, found {_type_name(value)}{_nil_hint(value)}")
    return values


@_builtin("sum(array)", {1})
def _sum(ev: _Evaluator, call: _Call, args: list[Any]) -> int | float:
    _array_arg(call, 1, args[0])
    return _checked_number(call, sum(_numbers(ev, call, args)))


@_builtin("mean(array)", {1})
def _mean(ev: _Evaluator, call: _Call, args: list[Any]) -> float | None:
    values = _numbers(ev, call, [_array_arg(call, 1, args[0])])
    return _checked_number(call, math.fsum(values) / len(values)) if values else None


def _extreme(ev: _Evaluator, call: _Call, args: list[Any], pick: Callable[[list[Any]], Any]) -> Any:
    values = args[0] if len(args) == 1 and isinstance(args[0], list) else args
    ev.charge(len(values))
    if not values:
        return None
    if not (all(_is_number(v) for v in values) or all(isinstance(v, str) for v in values)):
        _fail(call, f"{call.name}() compares numbers or strings, not {', '.join(sorted({_type_name(v) for v in values}))}")
    return pick(values)


@_builtin("min(array) or min(a, b, ...)", range(1, 65))
def _min(ev: _Evaluator, call: _Call, args: list[Any]) -> Any:
    return _extreme(ev, call, args, min)


@_builtin("max(array) or max(a, b, ...)", range(1, 65))
def _max(ev: _Evaluator, call: _Call, args: list[Any]) -> Any:
    return _extreme(ev, call, args, max)


def _map_arg(call: _Call, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        _arg_error(call, 1, "a map", value)
    return value


@_builtin("keys(map)", {1})
def _keys(ev: _Evaluator, call: _Call, args: list[Any]) -> list[str]:
    mapping = _map_arg(call, args[0])
    ev.charge(len(mapping))
    return list(mapping)


@_builtin("values(map)", {1})
def _values(ev: _Evaluator, call: _Call, args: list[Any]) -> list[Any]:
    mapping = _map_arg(call, args[0])
    ev.charge(len(mapping))
    return list(mapping.values())


def _string_function(name: str, compute: Callable[[str], str], growth: int = 1) -> None:
    """Register a one-string function whose result is at most `growth` times longer."""

    def impl(ev: _Evaluator, call: _Call, args: list[Any]) -> str:
        text = _string_arg(call, 1, args[0])
        ev.new_string(call, len(text) * growth)
        return compute(text)

    _builtin(f"{name}(string)", {1})(impl)


_string_function("lower", str.lower, growth=2)  # a few characters lengthen when case-mapped
_string_function("upper", str.upper, growth=3)


@_builtin("trim(string[, characters])", {1, 2})
def _trim(ev: _Evaluator, call: _Call, args: list[Any]) -> str:
    text = _string_arg(call, 1, args[0])
    ev.charge_chars(len(text))
    return text.strip(_string_arg(call, 2, args[1])) if len(args) == 2 else text.strip()


@_builtin("trimPrefix(string, prefix)", {2})
def _trim_prefix(ev: _Evaluator, call: _Call, args: list[Any]) -> str:
    return _string_arg(call, 1, args[0]).removeprefix(_string_arg(call, 2, args[1]))


@_builtin("trimSuffix(string, suffix)", {2})
def _trim_suffix(ev: _Evaluator, call: _Call, args: list[Any]) -> str:
    return _string_arg(call, 1, args[0]).removesuffix(_string_arg(call, 2, args[1]))


@_builtin("split(string, separator[, n])", {2, 3})
def _split(ev: _Evaluator, call: _Call, args: list[Any]) -> list[str]:
    text, separator = _string_arg(call, 1, args[0]), _string_arg(call, 2, args[1])
    limit = _int_arg(call, 3, args[2]) if len(args) == 3 else -1
    if limit == 0:
        return []
    pieces = (text.count(separator) + 1) if separator else len(text)
    ev.new_array(call, pieces if limit < 0 else min(pieces, limit))
    if not separator:
        chars = list(text)
        return chars if limit < 0 or limit >= len(chars) else [*chars[: limit - 1], "".join(chars[limit - 1 :])]
    return text.split(separator, limit - 1 if limit > 0 else -1)


@_builtin("replace(string, old, new)", {3})
def _replace(ev: _Evaluator, call: _Call, args: list[Any]) -> str:
    text, old, new = (_string_arg(call, i, value) for i, value in enumerate(args, 1))
    occurrences = text.count(old) if old else len(text) + 1
    ev.new_string(call, len(text) + occurrences * (len(new) - len(old)))
    return text.replace(old, new)


@_builtin("indexOf(string, substring)", {2})
def _index_of(ev: _Evaluator, call: _Call, args: list[Any]) -> int:
    text = _string_arg(call, 1, args[0])
    ev.charge_chars(len(text))
    return text.find(_string_arg(call, 2, args[1]))


@_builtin("lastIndexOf(string, substring)", {2})
def _last_index_of(ev: _Evaluator, call: _Call, args: list[Any]) -> int:
    text = _string_arg(call, 1, args[0])
    ev.charge_chars(len(text))
    return text.rfind(_string_arg(call, 2, args[1]))


@_builtin("hasPrefix(string, prefix)", {2})
def _has_prefix(ev: _Evaluator, call: _Call, args: list[Any]) -> bool:
    return _string_arg(call, 1, args[0]).startswith(_string_arg(call, 2, args[1]))


@_builtin("hasSuffix(string, suffix)", {2})
def _has_suffix(ev: _Evaluator, call: _Call, args: list[Any]) -> bool:
    return _string_arg(call, 1, args[0]).endswith(_string_arg(call, 2, args[1]))


@_builtin("string(value)", {1})
def _string(ev: _Evaluator, call: _Call, args: list[Any]) -> str:
    value = args[0]
    if isinstance(value, str):
        return value
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    if _is_number(value):
        return repr(value)
    return ev.to_json(value, call)


@_builtin("int(value)", {1})
def _int(ev: _Evaluator, call: _Call, args: list[Any]) -> int:
    value = args[0]
    if isinstance(value, str):
        try:
            value = int(value.strip().replace("_", ""), 10) if len(value) <= 40 else None
        except ValueError:
            value = None
        if value is None:
            _fail(call, f"int() cannot read {_quoted(args[0])} as an int")
    if not _is_number(value):
        _arg_error(call, 1, "a number or a numeric string", value)
    return _checked_number(call, math.trunc(value))


@_builtin("float(value)", {1})
def _float(ev: _Evaluator, call: _Call, args: list[Any]) -> float:
    value = args[0]
    if isinstance(value, str):
        try:
            value = float(value) if len(value) <= 400 else math.nan
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            _fail(call, f"float() cannot read {_quoted(args[0])} as a number")
    return _checked_number(call, float(_number_arg(call, 1, value)))


@_builtin("type(value)", {1})
def _type(ev: _Evaluator, call: _Call, args: list[Any]) -> str:
    return _type_name(args[0])


@_builtin("toJSON(value)", {1})
def _to_json(ev: _Evaluator, call: _Call, args: list[Any]) -> str:
    return ev.to_json(args[0], call)


@_builtin("abs(number)", {1})
def _abs(ev: _Evaluator, call: _Call, args: list[Any]) -> int | float:
    return _checked_number(call, abs(_number_arg(call, 1, args[0])))


@_builtin("ceil(number)", {1})
def _ceil(ev: _Evaluator, call: _Call, args: list[Any]) -> float:
    return float(math.ceil(_number_arg(call, 1, args[0])))


@_builtin("floor(number)", {1})
def _floor(ev: _Evaluator, call: _Call, args: list[Any]) -> float:
    return float(math.floor(_number_arg(call, 1, args[0])))


@_builtin("round(number)", {1})
def _round(ev: _Evaluator, call: _Call, args: list[Any]) -> float:
    value = _number_arg(call, 1, args[0])  # half away from zero, as Go's math.Round
    return math.copysign(math.floor(abs(value) + 0.5), value)


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
        evaluator.json_size(shown, tree, MAX_RESULT_SIZE)
    except RecursionError:  # a last guard: depths are bounded well below Python's limit
        raise QueryError("The query or its data is nested too deeply to evaluate") from None
    return {"rows": shown, "count": len(rows), "truncated": len(rows) > limit}
