"""Evaluating a memory_query tree: values, the evaluator and its operators."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import Any, NoReturn

from workspaces.query import bounds
from workspaces.query.bounds import INT_MAX, INT_MIN, QueryError
from workspaces.query.syntax import _Array, _Call, _Chain, _Coalesce, _Conditional, _Literal, _Logical, _Map, _Member, _Name, _Node, _Op, _Pointer, _quoted, _Slice, _Unary

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
        self.next_check = bounds.CLOCK_CHECK_EVERY
        self.deadline = time.monotonic() + bounds.DEADLINE_SECONDS
        self.allocated = 0

    # budgets

    def charge(self, steps: int) -> None:
        """Count `steps` of work; past the step budget or the deadline, stop the query."""
        self.steps += steps
        if self.steps >= self.next_check:
            self._checkpoint()

    def _checkpoint(self) -> None:
        if self.steps > bounds.MAX_STEPS:
            raise QueryError(
                f"The query needs more than {bounds.MAX_STEPS:,} evaluation steps; filter before join() or map() to narrow it"
            )
        if time.monotonic() > self.deadline:
            raise QueryError(f"The query ran longer than {bounds.DEADLINE_SECONDS:g} seconds and was stopped")
        self.next_check = min(self.steps + bounds.CLOCK_CHECK_EVERY, bounds.MAX_STEPS + 1)

    def charge_chars(self, length: int) -> None:
        """A string operation over `length` characters costs extra steps when the string is long."""
        if length >= bounds.STRING_STEP_CHARS:
            self.charge(length // bounds.STRING_STEP_CHARS)

    def new_string(self, where: _Node | _Op, length: int) -> None:
        """Account for a string of `length` characters about to be built."""
        if length > bounds.MAX_STRING_LENGTH:
            _fail(where, f"A string of {length:,} characters would be built; the limit is {bounds.MAX_STRING_LENGTH:,}")
        self.allocated += length
        if self.allocated > bounds.MAX_ALLOCATED_CHARS:
            _fail(where, f"The query builds more than {bounds.MAX_ALLOCATED_CHARS:,} characters of strings")
        self.charge_chars(length)

    def new_array(self, where: _Node | _Op, length: int) -> None:
        """Account for an array of `length` elements about to be built."""
        if length > bounds.MAX_INTERMEDIATE_ROWS:
            _fail(where, f"An array of {length:,} elements would be built; the limit is {bounds.MAX_INTERMEDIATE_ROWS:,}")
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
        if depth >= bounds.MAX_VALUE_DEPTH:
            raise QueryError(f"A value is nested more than {bounds.MAX_VALUE_DEPTH} levels deep to compare")
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
        if depth >= bounds.MAX_VALUE_DEPTH:
            raise QueryError(f"A value is nested more than {bounds.MAX_VALUE_DEPTH} levels deep to compare")
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
                if depth >= bounds.MAX_VALUE_DEPTH:
                    _fail(where, f"A value is nested more than {bounds.MAX_VALUE_DEPTH} levels deep")
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
        self.json_size(value, where, bounds.MAX_STRING_LENGTH)
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
        ends = [None if n is None else self.eval(n, scope) for n in (node.start, node.stop)]
        if not isinstance(obj, (list, str)):
            _fail(node, f"Cannot slice {_type_name(obj)}")
        if any(b is not None and (not isinstance(b, int) or isinstance(b, bool)) for b in ends):
            _fail(node, "Slice bounds must be ints")
        result = obj[ends[0] : ends[1]]
        self.charge(len(result) if isinstance(result, list) else len(result) // bounds.STRING_STEP_CHARS)
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


# --- the functions' registry (workspaces.query.functions fills it) -------------------------------


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
