"""The EPL floor of a published release at its *declared* noise, not the residuals' own spread.

Discrete Gaussian residuals of σ² = 2.5 declared as σ² = 10 (half the real ε for one count):
the matched floor (a discrete Gaussian of the residuals' variance) holds the estimate — it cannot
tell noise smaller than declared from the declared noise — and the declared floor does not. The
same residuals declared truly sit within the declared floor. The declared floor's exact loss is
the declared law's (reference: the law's log-ratio on the window, by hand).
"""

from __future__ import annotations

import math

import numpy as np

from auditlib.claims import NoiseLaw
from auditlib.epl import estimate_epl
from auditlib.simulate.noise import noise_sampler


def residuals() -> np.ndarray:
    return np.asarray(noise_sampler(2.5).rvs(20 * 280, np.random.default_rng(12)))


def test_a_half_claim_is_above_the_declared_floor_and_within_the_matched_one() -> None:
    r = residuals()
    matched = estimate_epl(r, seed=5)
    declared = estimate_epl(
        r, seed=5, null_reference=NoiseLaw("discrete_gaussian", 10.0).lattice_pmf()
    )
    true = estimate_epl(r, seed=5, null_reference=NoiseLaw("discrete_gaussian", 2.5).lattice_pmf())
    assert matched.epl == declared.epl == true.epl  # the estimate is the data's
    assert matched.epl <= matched.null_upper  # the residuals' own spread hides the misclaim
    assert declared.epl > declared.null_upper  # the declared noise does not
    assert true.epl <= true.null_upper
    assert declared.null_sigma2 > 9.9 and abs(true.null_sigma2 - 2.5) < 0.01


def test_the_declared_floor_knows_the_declared_laws_exact_loss() -> None:
    """Geometric noise of scale 2 has |log p(x)/p(x+1)| = 1/2 away from 0: its exact loss over
    any window is 1/2; a variance in place of a pmf gives the discrete Gaussian of that σ²."""
    r = residuals()
    geo = estimate_epl(r, seed=5, null_reference=NoiseLaw("geometric", 2.0).lattice_pmf())
    assert math.isclose(geo.null_true, 0.5, rel_tol=1e-9)
    dg = estimate_epl(r, seed=5, null_reference=10.0)
    assert math.isclose(dg.null_sigma2, 10.0, rel_tol=1e-9)
    x = dg.x
    assert math.isclose(dg.null_true, float(np.max(np.abs(2 * (x - 0) + 1)) / 20.0), rel_tol=1e-9)
