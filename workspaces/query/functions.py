"""The memory_query built-in functions (expr-lang's, plus join and union over relations)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from workspaces.query import bounds
from workspaces.query.engine import _builtin, _checked_number, _Evaluator, _fail, _is_number, _nil_hint, _Scope, _type_name
from workspaces.query.syntax import _Call, _Literal, _quoted

# --- functions -----------------------------------------------------------------------------




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
    if total > bounds.MAX_INTERMEDIATE_ROWS:
        _fail(call, f"The join would produce {total:,} rows; the limit is {bounds.MAX_INTERMEDIATE_ROWS:,}: filter its inputs first")
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
