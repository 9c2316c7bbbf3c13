"""The coarse-to-fine calibration search against the single-accountant one it replaces."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from auditlib.accounting import DiscreteGaussianComposition, bureau_epsilon, calibrate_factor
from auditlib.accounting._ladder import RUNGS
from auditlib.accounting.calibrate import LADDER_RTOL
from auditlib.accounting.discrete_gaussian_pld import planned_method
from auditlib.allocations import load_allocation

DELTA = 1e-11

# The single-accountant search (``ladder=False``, the search before the ladder) on the composed
# US persons accounting of pl94_2021_production at delta* = 1e-11: 20 compositions of about 3 CPU-s
# (add/remove) and 19 of about 9 CPU-s (bounded), too slow to rerun here; its certified factor
# intervals, as it returned them.
PL94_SINGLE_ACCOUNTANT = {
    "add_remove": (0.8753624014588921, 0.875392909879786),
    "bounded": (0.8753518846994945, 0.8753817839842026),
}


def _sides(comps: list[tuple[Fraction, int]], cal, **kwargs) -> tuple[float, float]:
    """An independent certified accountant's ``delta(target)`` bracket ends at both factor ends:
    the lower bound at ``c_lower`` and the upper bound at ``c_upper``."""
    out = []
    for c, end in ((cal.factor.lower, "lower"), (cal.factor.upper, "upper")):
        scaled = [(s * Fraction(float(c)), m) for s, m in comps]
        b = DiscreteGaussianComposition(scaled, **kwargs).delta(cal.target_epsilon)
        out.append(float(getattr(b, end)))
    return out[0], out[1]


@pytest.mark.parametrize("neighbours", ["add_remove", "bounded"])
def test_pl94_production_composed_calibration(neighbours: str) -> None:
    comps = load_allocation("pl94_2021_production").components(neighbours, "persons", "US", None)
    assert planned_method(comps) == "bracket-grid"
    cal = calibrate_factor(comps, DELTA)
    lo, hi = float(cal.factor.lower), float(cal.factor.upper)
    ref_lo, ref_hi = PL94_SINGLE_ACCOUNTANT[neighbours]
    # both intervals are certified, so they meet; the new one is at least as narrow
    assert lo <= ref_hi and ref_lo <= hi
    assert hi - lo < ref_hi - ref_lo
    assert hi - lo <= LADDER_RTOL * hi
    assert cal.accounting == "bracket-grid"
    assert cal.evaluations <= 8  # the single-accountant search composed 20 times
    # an accountant 4 times finer than any the search used certifies both ends again
    d_lo, d_hi = _sides(comps, cal, **RUNGS[2])
    assert d_lo > DELTA > d_hi


@pytest.mark.parametrize("neighbours", ["add_remove", "bounded"])
@pytest.mark.parametrize("geolevel", ["Block", "Block_Group"])
def test_matches_the_single_accountant_search(neighbours: str, geolevel: str) -> None:
    comps = load_allocation("dhc_2023_production").components(neighbours, "persons", "US", geolevel)
    ref = calibrate_factor(comps, DELTA, ladder=False, mode="bracket-grid")
    new = calibrate_factor(comps, DELTA, mode="bracket-grid")
    assert new.accounting == ref.accounting == "bracket-grid"
    assert new.target_epsilon == ref.target_epsilon
    assert float(new.factor.lower) <= float(ref.factor.upper)
    assert float(ref.factor.lower) <= float(new.factor.upper)
    assert float(new.factor.width) <= float(ref.factor.width)
    assert float(new.factor.width) <= LADDER_RTOL * float(new.factor.upper)
    # the reference search's own (default) accountant certifies the new ends
    d_lo, d_hi = _sides(comps, new, mode="bracket-grid")
    assert d_lo > DELTA > d_hi


@pytest.mark.parametrize("scale", [0.25, 4.0])
def test_far_targets_match_the_single_accountant_search(scale: float) -> None:
    # the solution far from c = 1 (4x the Bureau's eps: much less noise; a quarter: much more)
    comps = load_allocation("dhc_2023_production").components(
        "bounded", "persons", "US", "Block_Group"
    )
    rho = float(sum(Fraction(m) / (2 * s) for s, m in comps))
    target = scale * float(bureau_epsilon(rho, DELTA))
    ref = calibrate_factor(comps, DELTA, target, ladder=False, mode="bracket-grid")
    new = calibrate_factor(comps, DELTA, target, mode="bracket-grid")
    assert (float(new.factor.lower) > 1.0) == (scale < 1.0)
    assert float(new.factor.lower) <= float(ref.factor.upper)
    assert float(ref.factor.lower) <= float(new.factor.upper)
    assert float(new.factor.width) <= float(ref.factor.width)


def test_paper_bound_calibration_keeps_the_single_accountant_search() -> None:
    # P[L > eps] is a step function of c: the secant and band steps do not apply
    comps = load_allocation("dhc_2023_production").components(
        "add_remove", "persons", "US", "Block"
    )
    kw = {"method": "paper-bound", "mode": "bracket-grid"}
    new = calibrate_factor(comps, DELTA, 3.0, **kw)  # type: ignore[arg-type]
    ref = calibrate_factor(comps, DELTA, 3.0, ladder=False, **kw)  # type: ignore[arg-type]
    assert new.as_dict() == ref.as_dict()


@pytest.mark.parametrize("neighbours", ["add_remove", "bounded"])
def test_exact_lattice_compositions_keep_the_single_accountant_search(neighbours: str) -> None:
    comps = load_allocation("dhc_2023_production").components(neighbours, "persons", "US", "County")
    assert planned_method(comps) == "exact-lattice"
    new = calibrate_factor(comps, DELTA)
    ref = calibrate_factor(comps, DELTA, ladder=False)
    assert new.as_dict() == ref.as_dict()


@pytest.mark.parametrize(
    ("comps", "kwargs"),
    [
        ([(Fraction(3), 2), (Fraction(7, 2), 3)], {}),
        ([(Fraction(3), 2), (Fraction(7, 2), 3)], {"mode": "bracket-grid"}),
        ([(2.0**0.5, 4), (3.0**0.5, 2)], {}),
        ([(Fraction(5), 10)], {"max_lattice": 16}),
    ],
)
def test_planned_method_is_the_method_composing_takes(comps, kwargs) -> None:
    assert planned_method(comps, **kwargs) == DiscreteGaussianComposition(comps, **kwargs).method


def test_delta_upper_is_the_upper_end_of_delta() -> None:
    comps = load_allocation("dhc_2023_production").components(
        "add_remove", "persons", "US", "State"
    )
    comp = DiscreteGaussianComposition(comps, mode="bracket-grid")
    eps = np.linspace(0.0, 6.0, 13)
    assert np.array_equal(comp.delta_upper(eps), comp.delta(eps).upper)
