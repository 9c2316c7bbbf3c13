"""The fit's least-squares gradient as one sparse matrix (``auditlib.simulate.sparse_terms``)
against the gradient written out with a dense matrix per term, and against the per-term
gather/scatter form it replaces."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from auditlib.simulate.sparse_terms import TermsGradient


@dataclass(frozen=True)
class T:
    inv: np.ndarray
    y: np.ndarray
    weight: float


def _terms(n: int, rows: list[int], seed: int) -> list[T]:
    rng = np.random.default_rng(seed)
    out = []
    for k, m in enumerate(rows):
        inv = rng.permutation(n) if m == n else np.sort(rng.integers(0, m, n))
        inv = np.unique(inv, return_inverse=True)[1].astype(np.int64)  # every row used
        out.append(T(inv, rng.normal(0, 5, int(inv.max()) + 1), 1.0 / (k + 0.5)))
    return out


@pytest.mark.parametrize(("n", "rows"), [(1, [1]), (7, [1, 3, 7]), (500, [2, 40, 499, 500])])
def test_the_gradient_is_the_sum_of_the_terms(n: int, rows: list[int]) -> None:
    terms = _terms(n, rows, n)
    v = np.random.default_rng(1).random(n) * 10
    want = np.zeros(n)
    for t in terms:  # dense: Qᵀ w (Q v − y), Q[r, j] = 1 where variable j is in row r
        q = np.zeros((t.y.size, n))
        q[t.inv, np.arange(n)] = 1.0
        want += q.T @ (t.weight * (q @ v - t.y))
    got = TermsGradient(terms, n)(v)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)
    per_term = sum(
        t.weight * (np.bincount(t.inv, weights=v, minlength=t.y.size) - t.y)[t.inv] for t in terms
    )
    np.testing.assert_allclose(got, per_term, rtol=1e-12, atol=1e-9)
    assert not np.allclose(got, per_term + 1e-3, rtol=1e-12, atol=1e-9)  # the check can fail


def test_no_terms_is_a_zero_gradient() -> None:
    np.testing.assert_array_equal(TermsGradient([], 4)(np.ones(4)), np.zeros(4))
