"""The memory_query syntax: its tree, its grammar (lark, LALR) and the parser that builds the tree."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from workspaces.query import bounds
from workspaces.query.bounds import INT_MAX, QueryError, QuerySyntaxError

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
    if len(query) > bounds.MAX_QUERY_LENGTH:
        raise QueryError(f"The query is {len(query):,} characters long; the limit is {bounds.MAX_QUERY_LENGTH:,}")
    parser = _parser()
    try:
        tree = parser.parse(query)
    except UnexpectedInput as error:
        raise _syntax_error(parser, query, error) from None
    _check_depth(tree)
    return tree


def _check_depth(root: _Node) -> None:
    """Refuse trees deeper than bounds.MAX_NESTING before anything recurses over them (iteratively)."""
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > bounds.MAX_NESTING:
            raise QueryError(f"The query nests more than {bounds.MAX_NESTING} levels deep {node.where()}")
        stack.extend((child, depth + 1) for child in node.children())
