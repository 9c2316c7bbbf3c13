"""Beta-binomial mixture confidence sequences: the closed form, the interval, anytime validity.

The mixture is checked against direct numerical integration of the likelihood ratio over the
Beta(½, ½) prior (scipy.integrate.quad), the interval's ends against the defining inequality, and
anytime validity by simulation: over a path of 3 000 Bernoulli draws looked at every 10 draws, the
sequence at risk 0.1 misses p on at most 0.1 of the paths, while a Clopper–Pearson bound at the
same risk, re-used at every look, misses far more often (the failure a confidence sequence
prevents).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from auditlib.mpl.confseq import log_mixture, mixture_bound
from auditlib.mpl.rates import cp_upper, error_bounds
from auditlib.mpl.sequential import Claim
from tests.unit.test_mpl_sequential import audit_entry


@pytest.mark.parametrize(
    ("k", "n", "p"), [(0, 50, 0.1), (7, 50, 0.2), (50, 50, 0.9), (3, 40, 0.01)]
)
def test_mixture_is_the_integrated_likelihood_ratio(k: int, n: int, p: float) -> None:
    def integrand(t: float) -> float:
        lr = math.exp(k * (math.log(t) - math.log(p)) + (n - k) * (math.log1p(-t) - math.log1p(-p)))
        return lr * stats.beta.pdf(t, 0.5, 0.5)

    want = integrate.quad(integrand, 0.0, 1.0, points=[k / n], limit=200)[0]
    got = math.exp(log_mixture(np.array([float(k)]), n, np.array([p]))[0])
    assert got == pytest.approx(want, rel=1e-6)


def test_ends_sit_on_the_boundary_and_contain_the_estimate() -> None:
    k = np.array([0, 1, 10, 100, 999, 1000])
    n, risk = 1000, 0.01
    hi = mixture_bound(k, n, risk)
    lo = mixture_bound(k, n, risk, upper=False)
    assert np.all(lo <= k / n) and np.all(k / n <= hi)
    assert hi[-1] == 1.0 and lo[0] == 0.0
    level = math.log(1 / risk)
    inner = [(h, kk) for h, kk in zip(hi, k, strict=True) if kk < n]
    for h, kk in inner:  # just outside the set, and inside a hair below
        assert log_mixture(np.array([float(kk)]), n, np.array([h]))[0] >= level
        assert log_mixture(np.array([float(kk)]), n, np.array([h * (1 - 1e-9)]))[0] < level
    # wider than Clopper-Pearson at one fixed n: the price of every n at once
    assert np.all(hi[:-1] > cp_upper(k[:-1], n, risk))


def test_anytime_validity_where_a_repeated_fixed_n_bound_fails() -> None:
    rng = np.random.default_rng(5)
    p, risk, paths, length = 0.05, 0.1, 400, 3000
    looks = np.arange(10, length + 1, 10)
    counts = np.cumsum(rng.random((paths, length)) < p, axis=1)[:, looks - 1]
    miss_cs = np.zeros(paths, dtype=bool)
    miss_cp = np.zeros(paths, dtype=bool)
    for j, n in enumerate(looks.tolist()):  # every path at once, one look at a time
        miss_cs |= mixture_bound(counts[:, j], n, risk) < p
        miss_cp |= cp_upper(counts[:, j], n, risk) < p
    miss_cs, miss_cp = int(miss_cs.sum()), int(miss_cp.sum())
    assert miss_cs / paths <= risk
    assert miss_cp / paths > 2 * risk  # peeking at a fixed-n bound 300 times


def test_mixture_band_in_the_curve_audits() -> None:
    k = np.array([0, 5, 50])
    b = error_bounds(k, 1000, 0.05, "mixture")
    np.testing.assert_array_equal(b, mixture_bound(k, 1000, 0.05 / 3))
    res = audit_entry(
        "gaussian_broken",
        1.0,
        Claim("mu", 1.0),
        n_select=5_000,
        batch=5_000,
        max_n=40_000,
        rng=np.random.default_rng(0),
        band="mixture",
    )
    assert res.decision == "refuted" and res.risk_per_look == pytest.approx(0.05)
