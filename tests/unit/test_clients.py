"""Third-party DP libraries as real clients (the ``clients`` extra: OpenDP, IBM diffprivlib),
through ``examples/clients.py``: their noise on the real Midwest counts, dpaudit's exact accounting
of each mechanism against the ε the library claims, and MPL with the library as a black box.

Expectations, none taken from the code under test: each library documents its mechanism (scale
1/ε for Laplace and the geometric, a σ for the Gaussians) and states ε (or ρ-zCDP) itself; the
variances of those laws are textbook formulas. A claim of half the real ε is *mis-declared* and
must be flagged. The libraries are imported at module level: without the extra these tests fail
(an import error), they never skip. diffprivlib is seeded (``random_state``); OpenDP cannot be
seeded by design, so its MPL check runs at α = 1e-3 (a false flag has probability <= 1e-3).
"""

from __future__ import annotations

import math

import diffprivlib  # noqa: F401  the clients extra: fail, never skip, without it
import numpy as np
import opendp  # noqa: F401
import pytest

from tests.integration._examples import load_example

C = load_example("clients.py", "clients_example")
EPS = 1.0


def law_variance(name: str, claimed: dict[str, float]) -> float:
    """The variance the library's documentation gives its noise at ε = 1 (σ as the library set)."""
    a = math.exp(-EPS)
    return {
        "opendp-geometric": 2 * a / (1 - a) ** 2,  # two-sided geometric, P(k) ~ e^(-eps |k|)
        "diffprivlib-geometric": 2 * a / (1 - a) ** 2,
        "diffprivlib-laplace": 2 / EPS**2,  # Laplace of scale 1/eps
        "opendp-gaussian": (2 / EPS) ** 2,  # discrete Gaussian of scale 2: variance ~ 4
        "diffprivlib-gaussian": claimed.get("sigma", math.nan) ** 2,
    }[name]


@pytest.mark.parametrize(
    "name",
    [
        "opendp-geometric",
        "opendp-gaussian",
        "diffprivlib-laplace",
        "diffprivlib-geometric",
        "diffprivlib-gaussian",
    ],
)
def test_library_noise_on_the_midwest_counts_has_the_documented_law(name: str) -> None:
    # OpenDP draws from the system's entropy (no seed reaches it): 40 runs, 17,480 counts, put
    # the sample variance within 8 % with a margin of over 4 standard errors for every law here
    # (the geometric's, the heaviest-tailed, has a relative standard error of about 1.8 %)
    mech = C.MECHANISMS[name](EPS)
    df = C.published_table(mech, runs=40, seed=3)
    res = (df[[f"dp{r}" for r in range(40)]].to_numpy().T - df[C.COUNT].to_numpy()).ravel()
    assert abs(res.mean()) < 0.15
    assert res.var() == pytest.approx(law_variance(name, mech.claimed), rel=0.08)
    assert (res == np.round(res)).all() == mech.integer


def test_the_opendp_count_counts_records_then_adds_noise() -> None:
    mech = C.opendp_count(EPS)
    # no seed reaches OpenDP: 40 runs (17,480 counts) put the sample variance's relative
    # standard error near 1.8 %, so 8 % is over 4 of them (2 runs at 15 % was 2: one run in 20 failed)
    df = C.published_table(mech, runs=40, seed=0)
    res = (df[[f"dp{r}" for r in range(40)]].to_numpy().T - df[C.COUNT].to_numpy()).ravel()
    assert mech.epsilon == EPS  # OpenDP's own map(1) of the count chain
    a = math.exp(-EPS)
    assert res.var() == pytest.approx(2 * a / (1 - a) ** 2, rel=0.08)


def test_exact_accounting_agrees_with_each_library_claim_and_flags_half() -> None:
    for name, make in C.MECHANISMS.items():
        mech = make(EPS)
        claim = mech.epsilon
        delta = mech.claimed.get("delta", 1e-10)
        b = C.exact_epsilon(mech, delta)
        # dpaudit's certified eps(delta) of one release never exceeds what the library claims ...
        assert b.upper <= claim * (1 + 1e-6), (name, b, claim)
        if name == "opendp-gaussian":
            # ... the rho-zCDP conversion is loose: the exact eps is about 20 % below it
            assert 0.7 * claim < b.lower < 0.85 * claim, (name, b, claim)
        else:
            # ... and is the claim itself for pure eps and the analytic Gaussian (tight)
            assert b.lower >= claim * (1 - 1e-5), (name, b, claim)
        assert b.lower > claim / 2  # a half claim is refuted by the exact accounting


@pytest.mark.parametrize(
    ("name", "seed"),
    [("opendp-geometric", 11), ("diffprivlib-laplace", 12), ("diffprivlib-geometric", 13)],
)
def test_mpl_with_the_library_as_black_box_agrees_and_flags_half(name: str, seed: int) -> None:
    mech = C.MECHANISMS[name](EPS)
    r = C.mpl_bound(mech, seed, alpha=1e-3, n=10_000, delta_epsilons=(EPS / 2, EPS))
    assert r.lb <= mech.epsilon  # the true claim stands
    assert r.lb > mech.epsilon / 2  # the half claim is flagged: LB above it
    # a pure eps/2 claim says delta(eps/2) = 0; the hockey-stick lower bound says otherwise
    assert r.hockey_stick.delta_lb[0] > 0.05
    assert r.hockey_stick.delta_lb[1] <= 1e-3  # at the real eps: no delta is seen


@pytest.mark.parametrize(("name", "seed"), [("opendp-gaussian", 21), ("diffprivlib-gaussian", 22)])
def test_mpl_of_the_gaussians_stays_below_their_claims(name: str, seed: int) -> None:
    mech = C.MECHANISMS[name](EPS)
    r = C.mpl_bound(mech, seed, alpha=1e-3, n=10_000)
    assert 0 < r.lb <= mech.epsilon
