"""CHK-2: the condition language of metric checks, `result OP NUMBER` joined by `&&` / `||`, grouped by
parentheses; parsed by a tokenizer and a recursive-descent parser, never `eval`.

Property tests compare the parser's evaluation with a reference evaluation of generated trees,
written out with random blanks and redundant parentheses; examples pin precedence and the errors.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_common.condition import (
    MAX_DEPTH,
    ConditionError,
    check_condition,
    evaluate,
    parse_condition,
    render,
)
from rollout_common.errors import InvalidInputError

REFERENCE_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


@dataclass(frozen=True)
class Ref:
    """A generated condition: a comparison (`op`, `number`) or `op` in {"&&", "||"} over two parts."""

    op: str
    number: float = 0.0
    left: Ref | None = None
    right: Ref | None = None


def reference(tree: Ref, result: float) -> bool:
    if tree.op == "&&":
        assert tree.left and tree.right
        return reference(tree.left, result) and reference(tree.right, result)
    if tree.op == "||":
        assert tree.left and tree.right
        return reference(tree.left, result) or reference(tree.right, result)
    return REFERENCE_OPS[tree.op](result, tree.number)


NUMBERS = st.one_of(
    st.integers(-1000, 1000).map(float),
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 0.01, 1e-9, 2.5e10]),
)
BLANKS = st.sampled_from(["", " ", "  ", "\t"])
COMPARISONS = st.builds(Ref, op=st.sampled_from(sorted(REFERENCE_OPS)), number=NUMBERS)
TREES = st.recursive(
    COMPARISONS,
    lambda inner: st.builds(Ref, op=st.sampled_from(["&&", "||"]), left=inner, right=inner),
    max_leaves=12,
)


@st.composite
def written(draw: st.DrawFn, tree: Ref) -> str:
    """The tree as text: every compound part in parentheses (so the tree's grouping is the one
    meant), plus redundant parentheses and blanks drawn at random."""

    def text(node: Ref) -> str:
        if node.left is None or node.right is None:
            number = draw(st.sampled_from([repr(node.number), f"{node.number:.17g}", f"{node.number:.17e}"]))
            out = f"{draw(BLANKS)}result{draw(BLANKS)}{node.op}{draw(BLANKS)}{number}{draw(BLANKS)}"
        else:
            out = f"({text(node.left)}){node.op}({text(node.right)})"
        return f"({out})" if draw(st.booleans()) and draw(st.booleans()) else out

    return text(tree)


RESULTS = st.one_of(NUMBERS, st.sampled_from([0.0, 1.0, -1.0, 0.01]))


@settings(max_examples=400, deadline=None)
@given(data=st.data(), tree=TREES, results=st.lists(RESULTS, min_size=1, max_size=5))
def test_chk2_evaluation_agrees_with_the_reference(data: st.DataObject, tree: Ref, results: list[float]) -> None:
    text = data.draw(written(tree))
    parsed = parse_condition(text)
    for result in [*results, *(leaf for leaf in _numbers(tree))]:
        assert evaluate(parsed, result) == reference(tree, result), (text, result)


def _numbers(tree: Ref) -> list[float]:
    """The tree's own numbers: `==` and `!=` are decided there."""
    if tree.left is None or tree.right is None:
        return [tree.number]
    return [*_numbers(tree.left), *_numbers(tree.right)]


@settings(max_examples=300, deadline=None)
@given(tree=TREES, results=st.lists(RESULTS, min_size=1, max_size=5))
def test_chk2_the_fewest_parentheses_keep_the_meaning(tree: Ref, results: list[float]) -> None:
    """`render` writes only the parentheses precedence needs (`&&` before `||`, left to right): read
    back, it means the same, and writing it again gives the same text."""
    full = parse_condition(_fully_grouped(tree))
    short = render(full)
    reread = parse_condition(short)
    assert render(reread) == short
    for result in [*results, *_numbers(tree)]:
        assert evaluate(reread, result) == reference(tree, result), (short, result)


def _fully_grouped(node: Ref) -> str:
    if node.left is None or node.right is None:
        return f"result {node.op} {node.number!r}"
    return f"({_fully_grouped(node.left)}) {node.op} ({_fully_grouped(node.right)})"


@settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list("result<>=!&|() 0123456789.-eE+x\n")), max_size=40))
def test_chk2_any_text_parses_or_says_where_it_does_not(text: str) -> None:
    """Whatever the text, the parser returns a tree or a ConditionError with a column inside it."""
    try:
        parse_condition(text)
    except ConditionError as exc:
        assert 1 <= exc.column <= len(text) + 1
        assert str(exc).startswith(f"at column {exc.column}: expected ")


@pytest.mark.parametrize(
    ("text", "result", "expected"),
    [
        # && binds tighter than ||: false || (true && false) is false, (false || true) && false too,
        # but true || (false && false) is true where (true || false) && false would be false.
        ("result < 1 || result > 5 && result < 3", 0.5, True),
        ("(result < 1 || result > 5) && result < 0", 0.5, False),
        ("result == 0.01", 0.01, True),
        ("result != 0.01", 0.01, False),
        ("result >= -2.5e-3", -0.0025, True),
        ("result <= 1E2", 100.0, True),
        ("((result > 0))", 0.0, False),
        ("result>0&&result<1", 0.5, True),
        ("result > 0 &&\n  result < 1", 1.0, False),
    ],
)
def test_chk2_examples(text: str, result: float, expected: bool) -> None:
    assert evaluate(parse_condition(text), result) is expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("result < ", "at column 10: expected a number after <, found the end of the condition"),
        ("result << 1", "at column 9: expected a number after <, found '<'"),
        ("result = 1", "at column 8: expected result, a number, an operator or a parenthesis, found '='"),
        ("result =< 1", "at column 8: expected result, a number, an operator or a parenthesis, found '='"),
        ("value < 1", "at column 1: expected result or '(', found 'value'"),
        ("1 > result", "at column 1: expected result or '(', found '1'"),
        ("result 1", "at column 8: expected a comparison operator (<, <=, >, >=, ==, !=), found '1'"),
        ("result < 1 result > 2", "at column 12: expected &&, || or the end of the condition, found 'result'"),
        ("result < 1 & result > 2", "at column 12: expected result, a number, an operator or a parenthesis, found '&'"),
        ("result < 1 and result > 2", "at column 12: expected &&, || or the end of the condition, found 'and'"),
        (
            "(result < 1",
            "at column 12: expected &&, || or ')' closing the '(' at column 1, found the end of the condition",
        ),
        ("result < 1)", "at column 11: expected &&, || or the end of the condition, found ')'"),
        ("", "at column 1: expected result or '(', found the end of the condition"),
        ("result < 1 ||", "at column 14: expected result or '(', found the end of the condition"),
        ("result < 1e999", "at column 10: expected a finite number, found '1e999'"),
        ("result < .5", "at column 10: expected result, a number, an operator or a parenthesis, found '.'"),
        ("result < 0x10", "at column 11: expected &&, || or the end of the condition, found 'x10'"),
        ("__import__('os')", "at column 1: expected result or '(', found '__import__'"),
    ],
)
def test_chk2_errors_name_the_column_and_what_was_expected(text: str, message: str) -> None:
    with pytest.raises(ConditionError) as raised:
        parse_condition(text)
    assert str(raised.value) == message


def test_chk2_nesting_and_length_are_bounded() -> None:
    deep = "(" * (MAX_DEPTH + 1) + "result < 1" + ")" * (MAX_DEPTH + 1)
    with pytest.raises(ConditionError, match=f"at column {MAX_DEPTH + 1}: expected at most {MAX_DEPTH} nested"):
        parse_condition(deep)
    fine = "(" * MAX_DEPTH + "result < 1" + ")" * MAX_DEPTH
    assert evaluate(parse_condition(fine), 0.5) is True
    with pytest.raises(ConditionError, match="at column 1001: expected at most 1000 characters"):
        parse_condition("result < 1 || " * 100)


def test_chk2_check_condition_names_stage_check_and_field() -> None:
    """The function a sequence's application uses: its error names the stage, the check, the field."""
    with pytest.raises(InvalidInputError) as raised:
        check_condition("result <", stage="prod", check="error-rate", field="successCondition")
    assert str(raised.value) == (
        "stage 'prod', check 'error-rate': successCondition 'result <' at column 9: "
        "expected a number after <, found the end of the condition"
    )
    assert evaluate(check_condition("result < 1", stage="prod", check="e", field="successCondition"), 0) is True
