"""Bad inputs raise errors that name the parameter, the value and what is allowed."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from auditlib.accounting import Bracket, DiscreteGaussianComposition
from auditlib.exceptions import AccountingError, InvalidParameterError


@pytest.mark.parametrize(
    ("components", "match"),
    [
        ([(0.0, 1)], r"components\[0\] sigma2 must be positive and finite, got 0\.0"),
        ([(5, 1), (-2.5, 3)], r"components\[1\] sigma2 must be positive and finite, got -2\.5"),
        ([(math.inf, 1)], r"sigma2 must be positive and finite, got inf"),
        ([(math.nan, 1)], r"sigma2 must be positive and finite, got nan"),
        ([(Fraction(-1, 3), 1)], r"sigma2 must be positive and finite, got Fraction\(-1, 3\)"),
        ([(5, 0)], r"components\[0\] count must be an integer >= 1, got 0"),
        ([(5, 2.5)], r"count must be an integer >= 1, got 2\.5"),
        ([(5, True)], r"count must be an integer >= 1, got True"),
        ([("5", 1)], r"sigma2 must be a real number, got '5'"),
        ([(5,)], r"components\[0\] must be a \(sigma2, count\) pair, got \(5,\)"),
        ([], r"at least one \(sigma2, count\) pair"),
        ("abc", r"components must be a sequence of \(sigma2, count\) pairs"),
    ],
)
def test_bad_components(components, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidParameterError, match=match):
        DiscreteGaussianComposition(components)


@pytest.fixture(scope="module")
def acc() -> DiscreteGaussianComposition:
    return DiscreteGaussianComposition([(Fraction(5), 10)])


@pytest.mark.parametrize(
    ("delta", "match"),
    [
        (0.0, r"delta must lie strictly between 0 and 1, got 0\.0"),
        (1.0, r"got 1\.0"),
        (-1e-5, r"got -1e-05"),
        (math.nan, r"got nan"),
        ([1e-5, 2.0], r"got 2\.0"),
    ],
)
def test_bad_delta(acc: DiscreteGaussianComposition, delta, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidParameterError, match=match):
        acc.epsilon(delta)


@pytest.mark.parametrize(
    ("eps", "match"),
    [(-0.5, r"epsilon must be >= 0 \(and not NaN\), got -0\.5"), (math.nan, r"got nan")],
)
def test_bad_epsilon(acc: DiscreteGaussianComposition, eps: float, match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        acc.delta(eps)


def test_uncertifiable_delta(acc: DiscreteGaussianComposition) -> None:
    with pytest.raises(AccountingError, match=r"delta=1e-28 is below what this accountant can"):
        acc.epsilon(1e-28)


def test_infinite_epsilon_leaves_only_the_truncated_mass(acc: DiscreteGaussianComposition) -> None:
    b = acc.delta(math.inf)
    assert b.lower == 0.0 and 0.0 < b.upper < 1e-27


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"grid": 0.0}, InvalidParameterError, r"grid must be positive and finite, got 0\.0"),
        ({"grid": -1e-3}, InvalidParameterError, r"grid must be positive and finite, got -0\.001"),
        ({"max_lattice": 3}, InvalidParameterError, r"max_lattice must be an integer >= 16, got 3"),
        ({"mode": "fft"}, InvalidParameterError, r"mode must be .* got 'fft'"),
        ({"limit_denominator": 0}, InvalidParameterError, r"limit_denominator .* got 0"),
        ({"max_work": math.inf}, InvalidParameterError, r"max_work must be positive and finite"),
        (
            {"mode": "exact-lattice", "max_lattice": 1000},
            AccountingError,
            r"no exact lattice within budget",
        ),
        (
            {"mode": "bracket-grid", "grid": 1e-9},
            AccountingError,
            r"grid 1e-09 is too fine for direct convolution.*FFT is not used",
        ),
    ],
)
def test_bad_options(kwargs, exc, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(exc, match=match):
        DiscreteGaussianComposition([(Fraction(5), 10), (math.sqrt(2.0), 1)], **kwargs)


def test_float_conversion_is_exact_unless_asked() -> None:
    exact = DiscreteGaussianComposition([(0.1, 2)], mode="bracket-grid", grid=1e-3)
    assert exact.components == ((Fraction(0.1), 2),)
    limited = DiscreteGaussianComposition([(0.1, 2)], limit_denominator=1000)
    assert limited.components == ((Fraction(1, 10), 2),)
    assert limited.method == "exact-lattice"


def test_bracket_rejects_inverted_interval() -> None:
    with pytest.raises(ValueError, match="lower <= upper"):
        Bracket(2.0, 1.0, "exact-lattice")


def test_a_sum_too_costly_to_build_is_refused_before_any_lattice() -> None:
    """What grows with a query's sensitivity: the terms its noise composes (binary powering by
    direct convolutions); refused with the bounds named, before anything is built."""
    import time

    t0 = time.process_time()
    with pytest.raises(AccountingError) as info:
        DiscreteGaussianComposition([(4, 10**12)])
    assert time.process_time() - t0 < 5  # CPU seconds, whatever the machine's load
    msg = str(info.value)
    assert "1,000,000,000,000 discrete Gaussian terms of sigma2 = 4" in msg
    assert "MAX_LATTICE" in msg and "MAX_WORK" in msg and "lower the sensitivity" in msg
    with pytest.raises(AccountingError, match="sigma2 = 1e\\+12"):
        DiscreteGaussianComposition([(10**12, 1)])
    assert DiscreteGaussianComposition([(4, 2**10)]).rho == 2**10 / 8  # still composed
