"""Cross-check against Google's ``dp-accounting`` PLD accountant, where it is valid, and where not.

``dp_accounting.pld`` discretizes each discrete Gaussian's loss pessimistically on a grid of
``value_discretization_interval = 1e-4`` (each loss rounded up), composes by FFT, and truncates
``tail_mass_truncation`` (1e-15 by default) of the tails. So, at moderate delta, its epsilon lies
above the truth by at most ``(number of queries) x 1e-4`` (every composed loss moves up by less
than that). Su, Su & Wang's setting, add/remove; our brackets are certified (and ~1e-11 wide).

Where it fails: with the default tail truncation it returns infinity at delta <= 1e-15 (the
truncated mass is counted as infinite loss); with a tighter truncation (1e-30) its "pessimistic"
epsilon falls *below* the certified lower end at delta <= 1e-14 (FFT round-off in the tails), i.e.
it is then no upper bound.
"""

from __future__ import annotations

import math

import pytest

from auditlib.accounting import DiscreteGaussianComposition
from auditlib.allocations import load_allocation

pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")

ALLOC = load_allocation("dhcp_20220825_paper")
LEVELS = ALLOC.geolevels()
INTERVAL = 1e-4


def _level_pld(level: str, tail: float = 1e-15):  # type: ignore[no-untyped-def]
    comps = ALLOC.components("add_remove", "persons", "US", level)
    sigma2, _ = comps[0]
    assert all(c == (sigma2, 1) for c in comps) and len(comps) == 10
    base = pld.from_discrete_gaussian_mechanism(
        math.sqrt(float(sigma2)), value_discretization_interval=INTERVAL
    )
    return base.self_compose(10, tail_mass_truncation=tail)


@pytest.mark.parametrize("level", ["US", "State", "County", "Tract_Subset", "Block"])
def test_per_level_agrees_within_its_discretization(level: str) -> None:
    ours = DiscreteGaussianComposition(ALLOC.components("add_remove", "persons", "US", level))
    theirs = _level_pld(level)
    for delta in (1e-5, 1e-10):
        b = ours.epsilon(delta)
        eps = theirs.get_epsilon_for_delta(delta)
        assert float(b.lower) - 1e-12 <= eps <= float(b.upper) + 10 * INTERVAL
    # where it stops: the default tail truncation makes delta = 1e-15 unreachable
    assert math.isinf(theirs.get_epsilon_for_delta(1e-15))
    assert math.isfinite(float(ours.epsilon(1e-15).upper))


def test_eight_levels_composed() -> None:
    """REFERENCE.md: exact eps(1e-10) = 20.3246897508; dp-accounting sits above it within its
    discretization (80 queries x 1e-4), and below it at delta <= 1e-14 once its tail truncation
    is tightened to 1e-30."""
    ours = DiscreteGaussianComposition(ALLOC.components("add_remove", "persons", "US"))
    b = ours.epsilon(1e-10)
    assert float(b.lower) <= 20.3246897508 + 1e-9 and 20.3246897508 - 1e-9 <= float(b.upper)
    composed = _level_pld(LEVELS[0], 1e-30)
    for level in LEVELS[1:]:
        composed = composed.compose(_level_pld(level, 1e-30), tail_mass_truncation=1e-30)
    eps = composed.get_epsilon_for_delta(1e-10)
    assert float(b.lower) <= eps <= float(b.upper) + 80 * INTERVAL
    for delta in (1e-14, 1e-16):
        certified_lower = float(ours.epsilon(delta).lower)
        assert composed.get_epsilon_for_delta(delta) < certified_lower - 1e-3


@pytest.mark.parametrize(
    ("allocation", "universe", "level"),
    [
        ("pl94_2021_production", "persons", "State"),
        ("pl94_2021_production", "persons", "Block"),
        ("dhc_2023_production", "persons", "County"),
        ("dhc_2023_production", "units", "Tract_Subset"),
    ],
)
@pytest.mark.parametrize("neighbours", ["add_remove", "bounded"])
def test_production_levels_agree(
    allocation: str, universe: str, level: str, neighbours: str
) -> None:
    """Production levels (heterogeneous variances), both neighbour relations: our exact lattice
    against dp-accounting's composition of one PLD per noise term (a ``bounded`` query is two
    terms of variance 1/rho_q), within its discretization (terms x 1e-4) at delta = 1e-6."""
    comps = load_allocation(allocation).components(neighbours, universe, "US", level)
    ours = DiscreteGaussianComposition(comps)
    assert ours.method == "exact-lattice"
    b = ours.epsilon(1e-6)
    total = None
    n_terms = 0
    for sigma2, count in comps:
        p = pld.from_discrete_gaussian_mechanism(
            math.sqrt(float(sigma2)), value_discretization_interval=INTERVAL
        )
        p = p.self_compose(count) if count > 1 else p
        total = p if total is None else total.compose(p)
        n_terms += count
    assert total is not None
    eps = total.get_epsilon_for_delta(1e-6)
    assert float(b.lower) - 1e-12 <= eps <= float(b.upper) + n_terms * INTERVAL
