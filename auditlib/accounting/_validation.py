"""Input checks shared by the accountants; every error names the parameter, the value and the rule."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from auditlib.exceptions import InvalidParameterError

MAX_WORK = 1e12
"""Largest ``max_work`` (multiply-adds of the direct convolution) an accountant accepts. A
composition costs 1-2 s per 1e9 on one busy core (the PL94 + DHC cumulative composition: about
6e10 in 2 minutes), so the bound is about half an hour per composition; larger budgets are refused
before any lattice is built. With the default ``max_lattice`` the real allocations never use more
than about 1e11."""

MAX_LATTICE = 20_000_000
"""Largest ``max_lattice`` (points of one lattice) an accountant accepts. The peak memory is about
150 bytes per point (0.69 GB measured for 4.6 million points: the rounded-up, rounded-down and
split lattices, their losses and the convolution's buffers), so the bound is about 3 GB."""


def check_budgets(max_lattice: object, max_work: object) -> tuple[int, float]:
    """``max_lattice`` as an integer in ``16..MAX_LATTICE`` and ``max_work`` as a positive float
    ``<= MAX_WORK``, or raise naming the value and the largest allowed."""
    if isinstance(max_lattice, bool) or not isinstance(max_lattice, int) or max_lattice < 16:
        raise InvalidParameterError(f"max_lattice must be an integer >= 16, got {max_lattice!r}")
    if max_lattice > MAX_LATTICE:
        raise InvalidParameterError(
            f"Invalid max_lattice: {max_lattice!r}; the largest allowed is {MAX_LATTICE} "
            "(MAX_LATTICE: about 150 bytes per lattice point, 3 GB)"
        )
    return max_lattice, check_max_work(max_work)


def check_max_work(max_work: object) -> float:
    """``max_work`` as a positive float ``<= MAX_WORK``, or raise naming the value and the bound."""
    if not (isinstance(max_work, int | float) and math.isfinite(max_work) and max_work > 0):
        raise InvalidParameterError(f"max_work must be positive and finite, got {max_work!r}")
    if max_work > MAX_WORK:
        raise InvalidParameterError(
            f"Invalid max_work: {max_work:g}; the largest allowed is {MAX_WORK:g} multiply-adds "
            "(MAX_WORK: 1-2 s per 1e9 on one core, about half an hour)"
        )
    return float(max_work)


def to_positive_fraction(value: Any, name: str, limit_denominator: int | None = None) -> Fraction:
    """Exact rational value of a positive, finite number.

    ``Fraction``, ``int`` and ``Decimal`` are taken exactly. A float is converted *exactly*
    (``Fraction(x)``, its binary value), unless ``limit_denominator`` is given, in which case
    ``Fraction(x).limit_denominator(limit_denominator)`` is used (the nearest rational with a bounded
    denominator: the accounting is then for that rational, not for the float).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real | Decimal):
        raise InvalidParameterError(f"{name} must be a real number, got {value!r}")
    if isinstance(value, numbers.Rational):
        frac = Fraction(int(value.numerator), int(value.denominator))
    elif isinstance(value, Decimal):
        if not value.is_finite():
            raise InvalidParameterError(f"{name} must be positive and finite, got {value!r}")
        frac = Fraction(value)
    else:
        x = float(value)
        if not math.isfinite(x):
            raise InvalidParameterError(f"{name} must be positive and finite, got {value!r}")
        frac = Fraction(x)
        if limit_denominator is not None and frac > 0:
            frac = frac.limit_denominator(limit_denominator)
    if frac <= 0:
        raise InvalidParameterError(f"{name} must be positive and finite, got {value!r}")
    return frac


def parse_components(
    components: Iterable[tuple[Any, Any]], limit_denominator: int | None
) -> tuple[tuple[Fraction, int], ...]:
    """Validated ``(sigma2, count)`` pairs: ``sigma2 > 0`` finite, ``count`` an integer ``>= 1``."""
    if isinstance(components, str | bytes) or not isinstance(components, Iterable):
        raise InvalidParameterError(
            f"components must be a sequence of (sigma2, count) pairs, got {components!r}"
        )
    if limit_denominator is not None and (
        isinstance(limit_denominator, bool)
        or not isinstance(limit_denominator, numbers.Integral)
        or limit_denominator < 1
    ):
        raise InvalidParameterError(
            f"limit_denominator must be None or an integer >= 1, got {limit_denominator!r}"
        )
    parsed: list[tuple[Fraction, int]] = []
    for i, item in enumerate(components):
        try:
            sigma2, count = item
        except (TypeError, ValueError):
            raise InvalidParameterError(
                f"components[{i}] must be a (sigma2, count) pair, got {item!r}"
            ) from None
        frac = to_positive_fraction(sigma2, f"components[{i}] sigma2", limit_denominator)
        if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 1:
            raise InvalidParameterError(
                f"components[{i}] count must be an integer >= 1, got {count!r}"
            )
        parsed.append((frac, int(count)))
    if not parsed:
        raise InvalidParameterError(
            "components must hold at least one (sigma2, count) pair, got []"
        )
    return tuple(parsed)


def check_epsilon(epsilon: ArrayLike, name: str = "epsilon") -> np.ndarray:
    """Float array of privacy parameters ``eps >= 0`` (``+inf`` allowed; NaN and negatives not)."""
    eps = np.asarray(epsilon, dtype=np.float64)
    bad = np.isnan(eps) | (eps < 0)
    if np.any(bad):
        raise InvalidParameterError(
            f"{name} must be >= 0 (and not NaN), got {float(eps[bad].flat[0])!r}"
        )
    return eps


def check_delta(delta: ArrayLike, name: str = "delta") -> np.ndarray:
    """Float array of ``delta`` strictly inside ``(0, 1)``."""
    d = np.asarray(delta, dtype=np.float64)
    bad = ~((d > 0) & (d < 1))
    if np.any(bad):
        raise InvalidParameterError(
            f"{name} must lie strictly between 0 and 1, got {float(d[bad].flat[0])!r}"
        )
    return d


def check_rho(rho: ArrayLike) -> np.ndarray:
    """Float array of zCDP parameters ``rho > 0`` and finite (``Fraction`` accepted)."""
    if isinstance(rho, numbers.Rational):
        rho = float(rho)
    r = np.asarray(rho, dtype=np.float64)
    bad = ~(np.isfinite(r) & (r > 0))
    if np.any(bad):
        raise InvalidParameterError(
            f"rho must be positive and finite, got {float(r[bad].flat[0])!r}"
        )
    return r
