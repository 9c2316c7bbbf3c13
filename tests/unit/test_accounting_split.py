"""The bracket mode's second-order split refinement against independent references.

* the split of one atom onto the dyadic grid keeps its P- and Q-mass (40-digit decimal arithmetic);
* a 3-query composition with incommensurate variances (denominators ~1e6, so no exact lattice)
  against brute-force enumeration in 40-digit decimal arithmetic: the truth lies in
  ``[box_sum, box_sum + outside]`` (the mass outside the box, summed to +-60 sigma, under P);
* the exact-lattice values of Su, Su & Wang's setting recomputed through the bracket path;
* power: without its correction ``B`` the split profile lies above the truth, so ``B`` is needed
  for a valid lower end; and the split bracket is far narrower than rounding up and down.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from auditlib.accounting import DiscreteGaussianComposition
from auditlib.accounting._lattice import LatticeMeasure
from auditlib.accounting._split import split_to_grid
from auditlib.allocations import load_allocation
from auditlib.exceptions import AccountingError

SIGMA2S = [Fraction(1000003, 1000000), Fraction(1299997, 1000000), Fraction(700001, 1000000)]


def _dec(x: Fraction) -> Decimal:
    return Decimal(x.numerator) / Decimal(x.denominator)


def _query_tables(sigma2: Fraction) -> tuple[list[Decimal], list[Decimal], Decimal, int]:
    """Per-query pmf on ``|s| <= B``, ``e^(-loss)`` of each ``s``, mass outside, and ``B``."""
    s2 = _dec(sigma2)
    bound = int(14 * math.sqrt(float(sigma2))) + 3
    wide = int(60 * math.sqrt(float(sigma2))) + 60
    w = {k: (-(Decimal(k * k)) / (2 * s2)).exp() for k in range(-wide, wide + 1)}
    z = sum(w.values(), Decimal(0))
    pmf = [w[k] / z for k in range(-bound, bound + 1)]
    outside = sum((v for k, v in w.items() if abs(k) > bound), Decimal(0)) / z
    y = [(-(Decimal(1) / 2 + k) / s2).exp() for k in range(-bound, bound + 1)]
    return pmf, y, outside, bound


def brute_force_delta(sigma2s: list[Fraction], eps: float) -> tuple[float, float]:
    """``[box_sum, box_sum + outside]`` around the true ``delta(eps)`` (40-digit decimals)."""
    with localcontext() as ctx:
        ctx.prec = 40
        tables = [_query_tables(s) for s in sigma2s]
        e = Decimal(eps).exp()
        # fold queries one by one into (P-mass, e^(-L)) pairs, merging nothing: every tuple counts
        pairs = [(Decimal(1), Decimal(1))]
        for pmf, y, _, _ in tables:
            pairs = [(p * pj, q * yj) for p, q in pairs for pj, yj in zip(pmf, y, strict=True)]
        box = sum((p * (1 - e * q) for p, q in pairs if e * q < 1), Decimal(0))
        outside = sum((t[2] for t in tables), Decimal(0))
        return float(box), float(box + outside)


@pytest.fixture(scope="module")
def hetero() -> DiscreteGaussianComposition:
    comp = DiscreteGaussianComposition([(s, 1) for s in SIGMA2S])
    assert comp.method == "bracket-grid"  # no exact lattice: the denominators are ~1e6
    assert comp.split_classes == 3
    return comp


def test_split_keeps_p_and_q_mass() -> None:
    c, g = Fraction(1, 3), Fraction(1, 7)
    values = np.array([0.2, 0.5, 0.3])
    m = LatticeMeasure(-1, values, 0.0, 0.0)
    shift = 4
    out, err = split_to_grid(c, g, m, shift)
    assert err < 1e-14
    with localcontext() as ctx:
        ctx.prec = 40
        h = Decimal(1) / Decimal(2**shift)
        p_in = sum((Decimal(v) for v in values.tolist()), Decimal(0))
        q_in = sum(
            (
                Decimal(v) * (-_dec(c + g * t)).exp()
                for v, t in zip(values.tolist(), (-1, 0, 1), strict=True)
            ),
            Decimal(0),
        )
        ks = range(out.offset, out.offset + out.size)
        p_out = sum((Decimal(v) for v in out.values.tolist()), Decimal(0))
        q_out = sum(
            (Decimal(v) * (-(h * k)).exp() for v, k in zip(out.values.tolist(), ks, strict=True)),
            Decimal(0),
        )
        assert abs(p_out / p_in - 1) < Decimal("1e-14")
        assert abs(q_out / q_in - 1) < Decimal("1e-14")
    # each atom lands on the two grid points around it, nowhere else
    losses = [float(c + g * t) for t in (-1, 0, 1)]
    allowed = {math.floor(x * 2**shift) + j for x in losses for j in (0, 1)}
    assert {k for k, v in zip(ks, out.values.tolist(), strict=True) if v > 0} <= allowed


@pytest.mark.parametrize("eps", [0.0, 1.0, 4.0, 8.0, 12.0, 16.0])
def test_delta_bracket_contains_brute_force(
    hetero: DiscreteGaussianComposition, eps: float
) -> None:
    lo, hi = brute_force_delta(SIGMA2S, eps)
    b = hetero.delta(eps)
    assert float(b.lower) <= hi * (1 + 1e-12)
    assert float(b.upper) >= lo * (1 - 1e-12)
    assert float(b.upper) - float(b.lower) <= 1e-6 * float(b.upper)  # second order: tight


@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10, 1e-15])
def test_epsilon_bracket_contains_brute_force(
    hetero: DiscreteGaussianComposition, delta: float
) -> None:
    b = hetero.epsilon(delta)
    # truth >= lower: delta(eps_lower) >= delta; truth <= upper: delta(eps_upper) <= delta
    assert brute_force_delta(SIGMA2S, float(b.lower))[1] >= delta
    assert brute_force_delta(SIGMA2S, float(b.upper))[0] <= delta * (1 + 1e-12)
    assert float(b.upper) - float(b.lower) <= 1e-6


def test_correction_is_needed() -> None:
    """The split profile errs high (Jensen): used as a lower end without ``B`` it cuts off the
    truth (on a coarse split grid, forced by a small work budget). With ``B`` it does not."""
    comp = DiscreteGaussianComposition([(s, 1) for s in SIGMA2S], max_work=2e5)
    assert comp.split_grid >= 2.0**-8
    split, lower = comp._split_upper, comp._split_lower
    assert split is not None and lower is not None
    for eps in (4.0, 8.0):
        lo, hi = brute_force_delta(SIGMA2S, eps)
        assert split.lower(eps) > hi * (1 + 1e-9)  # no correction: above the truth
        assert lower.lower(eps) <= lo  # with the correction: below it
        assert split.upper(eps) >= lo


def test_split_far_narrower_than_rounding() -> None:
    comps = [(s, 1) for s in SIGMA2S]
    rounded = DiscreteGaussianComposition(comps, grid=1e-4, refine=False).epsilon(1e-10)
    split = DiscreteGaussianComposition(comps, grid=1e-4).epsilon(1e-10)
    assert float(split.lower) >= float(rounded.lower)
    assert float(split.upper) <= float(rounded.upper)
    assert (split.upper - split.lower) * 100 <= rounded.upper - rounded.lower


def test_bracket_path_contains_exact_lattice_values() -> None:
    """Su, Su & Wang's setting, three levels: exact lattice vs the bracket path forced on it."""
    comps = load_allocation("dhcp_20220825_paper").components("add_remove", "persons", "US")
    per_level = [comps[i : i + 10] for i in (10, 20, 70)]  # State, County, Block
    sub = [c for level in per_level for c in level]
    exact = DiscreteGaussianComposition(sub, mode="exact-lattice")
    forced = DiscreteGaussianComposition(sub, mode="bracket-grid")
    assert forced.split_classes == 3
    deltas = np.array([1e-5, 1e-10, 1e-15, 1e-20])
    e, f = exact.epsilon(deltas), forced.epsilon(deltas)
    assert np.all(e.upper - e.lower < 1e-9)
    assert np.all(f.lower <= e.lower + 1e-12)
    assert np.all(f.upper >= e.upper - 1e-12)
    assert np.all(f.upper - f.lower <= 1e-6)


def test_pl94_persons_composed_meets_width_target() -> None:
    """All six PL94-171 persons levels (33 distinct variances, no common lattice): the eps bracket
    at delta = 1e-10 is at most 1e-6 wide and lies inside the rounded (first-order) bracket."""
    comps = load_allocation("pl94_2021_production").components("add_remove", "persons", "US")
    comp = DiscreteGaussianComposition(comps)
    assert comp.method == "bracket-grid" and comp.split_classes == 33
    b = comp.epsilon(1e-10)
    assert float(b.upper) - float(b.lower) <= 1e-6
    # the rounded bracket (coarse, first order) must not contradict the refined one
    assert comp._upper.upper(float(b.lower)) >= 1e-10
    assert comp._lower.lower(float(b.upper)) <= 1e-10


@pytest.mark.parametrize("neighbours", ["add_remove", "bounded"])
def test_bracket_path_on_a_production_level(neighbours: str) -> None:
    """DHC 2023 units, Tract_Subset (heterogeneous variances): the forced bracket path contains the
    exact lattice's values down to delta = 1e-20, at most 1e-6 wide."""
    comps = load_allocation("dhc_2023_production").components(
        neighbours, "units", "US", "Tract_Subset"
    )
    exact = DiscreteGaussianComposition(comps, mode="exact-lattice")
    forced = DiscreteGaussianComposition(comps, mode="bracket-grid", max_work=3e8)
    deltas = np.array([1e-6, 1e-12, 1e-20])
    e, f = exact.epsilon(deltas), forced.epsilon(deltas)
    assert np.all(f.lower <= e.lower + 1e-12) and np.all(f.upper >= e.upper - 1e-12)
    assert np.all(f.upper - f.lower <= 1e-6)


def test_user_split_grid(hetero: DiscreteGaussianComposition) -> None:
    """A coarser user grid widens the bracket (as h^2) around the default one; one too fine for
    the budgets is refused with the grid named."""
    comps = [(s, 1) for s in SIGMA2S]
    coarse = DiscreteGaussianComposition(comps, grid=1e-3, split_grid=2.0**-9)
    assert coarse.split_grid == 2.0**-9
    fine, wide = hetero.epsilon(1e-10), coarse.epsilon(1e-10)
    assert float(wide.lower) <= float(fine.lower) and float(fine.upper) <= float(wide.upper)
    assert float(wide.width) > 10 * float(fine.width)
    with pytest.raises(AccountingError, match="too fine for direct convolution"):
        DiscreteGaussianComposition(comps, split_grid=1e-9)
