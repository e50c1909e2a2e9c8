"""What a memory_query may cost (every way it can take time or memory is capped), and its errors."""

from __future__ import annotations

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
