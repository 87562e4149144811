"""The condition language of metric checks (CHK-2): `result OP NUMBER` joined by `&&` and `||`.

    condition  := either
    either     := both ("||" both)*
    both       := operand ("&&" operand)*
    operand    := "(" either ")" | comparison
    comparison := "result" ("<" | "<=" | ">" | ">=" | "==" | "!=") NUMBER
    NUMBER     := "-"? DIGITS ("." DIGITS)? (("e" | "E") ("+" | "-")? DIGITS)?

`&&` binds tighter than `||`, as in C and CEL; blanks between tokens are free. A tokenizer and a
recursive-descent parser build a small tree that `evaluate` walks: nothing is ever handed to
`eval`. The grammar is small enough that a CEL library would add a dependency to the shared
library (which installs with pydantic alone) for nothing the SPEC asks.

Every error is a `ConditionError` naming the column (1 = the first character) and what was
expected there, and `check_condition` puts the stage and check in front of it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

from rollout_common.errors import InvalidInputError

# Bounds that keep a hostile condition from costing more than a well-meant one: recursion depth
# and text length (a condition is one line in a sequence file).
MAX_LENGTH = 1000
MAX_DEPTH = 32
VARIABLE = "result"


class Op(str, Enum):
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    EQ = "=="
    NE = "!="


@dataclass(frozen=True, slots=True)
class Comparison:
    op: Op
    number: float


@dataclass(frozen=True, slots=True)
class Both:
    """`left && right`."""

    left: Condition
    right: Condition


@dataclass(frozen=True, slots=True)
class Either:
    """`left || right`."""

    left: Condition
    right: Condition


Condition = Comparison | Both | Either


class ConditionError(InvalidInputError):
    """A condition that does not parse: `column` (1-based) and what was `expected` there."""

    def __init__(self, *, column: int, expected: str, found: str) -> None:
        super().__init__(f"at column {column}: expected {expected}, found {found}")
        self.column = column
        self.expected = expected
        self.found = found


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "number", "word", an operator, "(", ")", "&&", "||" or "end"
    text: str
    column: int


# Longest operators first, so `<=` is never read as `<` followed by `=`.
_TOKEN = re.compile(
    r"(?P<number>-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<symbol>&&|\|\||<=|>=|==|!=|<|>|\(|\))"
)
_BLANKS = frozenset(" \t\r\n")
_OPERATORS = {op.value: op for op in Op}
_OPERATOR_LIST = "a comparison operator (<, <=, >, >=, ==, !=)"


def _found(token: _Token) -> str:
    return "the end of the condition" if token.kind == "end" else repr(token.text)


def _tokens(text: str) -> Iterator[_Token]:
    """The tokens one by one, so the first problem in reading order is the one reported."""
    position = 0
    while True:
        while position < len(text) and text[position] in _BLANKS:
            position += 1
        if position == len(text):
            yield _Token("end", "", position + 1)
            return
        match = _TOKEN.match(text, position)
        if match is None:
            raise ConditionError(column=position + 1, expected="result, a number, an operator or a parenthesis",
                                 found=repr(text[position]))  # fmt: skip
        kind = match.lastgroup or ""
        yield _Token(match.group() if kind == "symbol" else kind, match.group(), position + 1)
        position = match.end()


class _Parser:
    def __init__(self, tokens: Iterator[_Token]) -> None:
        self._tokens = tokens
        self._next = next(tokens)

    def _take(self) -> _Token:
        """The next token; the one after it is read now (the "end" token is never passed)."""
        token = self._next
        if token.kind != "end":
            self._next = next(self._tokens)
        return token

    def _expect(self, kind: str, *, expected: str) -> _Token:
        if self._next.kind != kind:
            raise ConditionError(column=self._next.column, expected=expected, found=_found(self._next))
        return self._take()

    def condition(self) -> Condition:
        parsed = self._either(depth=0)
        self._expect("end", expected="&&, || or the end of the condition")
        return parsed

    def _either(self, *, depth: int) -> Condition:
        parsed = self._both(depth=depth)
        while self._next.kind == "||":
            self._take()
            parsed = Either(parsed, self._both(depth=depth))
        return parsed

    def _both(self, *, depth: int) -> Condition:
        parsed = self._operand(depth=depth)
        while self._next.kind == "&&":
            self._take()
            parsed = Both(parsed, self._operand(depth=depth))
        return parsed

    def _operand(self, *, depth: int) -> Condition:
        if self._next.kind != "(":
            return self._comparison()
        opening = self._take()
        if depth >= MAX_DEPTH:
            raise ConditionError(column=opening.column, expected=f"at most {MAX_DEPTH} nested parentheses",
                                 found="more")  # fmt: skip
        inner = self._either(depth=depth + 1)
        self._expect(")", expected=f"&&, || or ')' closing the '(' at column {opening.column}")
        return inner

    def _comparison(self) -> Comparison:
        if not (self._next.kind == "word" and self._next.text == VARIABLE):
            raise ConditionError(column=self._next.column, expected="result or '('", found=_found(self._next))
        self._take()
        operator = self._next
        if operator.text not in _OPERATORS:
            raise ConditionError(column=operator.column, expected=_OPERATOR_LIST, found=_found(operator))
        self._take()
        number = self._expect("number", expected=f"a number after {operator.text}")
        value = float(number.text)
        if not math.isfinite(value):
            raise ConditionError(column=number.column, expected="a finite number", found=repr(number.text))
        return Comparison(_OPERATORS[operator.text], value)


def parse_condition(text: str) -> Condition:
    """The condition's tree; ConditionError (naming the column) when it is not one."""
    if len(text) > MAX_LENGTH:
        raise ConditionError(column=MAX_LENGTH + 1, expected=f"at most {MAX_LENGTH} characters", found="more")
    return _Parser(_tokens(text)).condition()


def evaluate(condition: Condition, result: float) -> bool:
    """Whether `result` satisfies the condition (`&&` and `||` short-circuit, as they read)."""
    match condition:
        case Comparison(op=op, number=number):
            return _compare(op, result, number=number)
        case Both(left=left, right=right):
            return evaluate(left, result) and evaluate(right, result)
        case Either(left=left, right=right):
            return evaluate(left, result) or evaluate(right, result)


def _compare(op: Op, result: float, *, number: float) -> bool:
    match op:
        case Op.LT:
            return result < number
        case Op.LE:
            return result <= number
        case Op.GT:
            return result > number
        case Op.GE:
            return result >= number
        case Op.EQ:
            return result == number
        case Op.NE:
            return result != number


def render(condition: Condition) -> str:
    """The condition as text with the fewest parentheses that keep its meaning: only an `||` inside
    an `&&` needs them (`&&` binds tighter, and both are associative)."""
    match condition:
        case Comparison(op=op, number=number):
            return f"{VARIABLE} {op.value} {number!r}"
        case Both(left=left, right=right):
            return f"{_operand_of_both(left)} && {_operand_of_both(right)}"
        case Either(left=left, right=right):
            return f"{render(left)} || {render(right)}"


def _operand_of_both(condition: Condition) -> str:
    return f"({render(condition)})" if isinstance(condition, Either) else render(condition)


def check_condition(text: str, *, stage: str, check: str, field: str) -> Condition:
    """Parse a check's condition when a sequence is applied; the error names stage, check and field."""
    try:
        return parse_condition(text)
    except ConditionError as exc:
        raise InvalidInputError(f"stage {stage!r}, check {check!r}: {field} {text!r} {exc}") from exc


__all__ = [
    "MAX_DEPTH",
    "MAX_LENGTH",
    "Both",
    "Comparison",
    "Condition",
    "ConditionError",
    "Either",
    "Op",
    "check_condition",
    "evaluate",
    "parse_condition",
    "render",
]
