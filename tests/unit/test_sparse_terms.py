"""The fit's least-squares gradient as one sparse matrix (``auditlib.simulate.sparse_terms``)
against the gradient written out with a dense matrix per term, and against the per-term
gather/scatter form it replaces."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import scipy.sparse as sp

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


def _stored_transpose(terms: list[T], n: int, v: np.ndarray) -> np.ndarray:
    """The gradient with ``Aᵀ`` stored as its own CSR matrix (one row per variable, its terms'
    rows in term order), the form held before: twice the matrices' memory."""
    sizes = [t.y.size for t in terms]
    off = np.cumsum([0, *sizes[:-1]])
    cols = np.stack([t.inv + o for t, o in zip(terms, off, strict=True)], axis=1).ravel()
    at = sp.csr_matrix(
        (np.ones(cols.size), cols, np.arange(0, cols.size + 1, len(terms))),
        shape=(n, sum(sizes)),
    )
    w = np.concatenate([np.full(s, t.weight) for t, s in zip(terms, sizes, strict=True)])
    c = at @ (w * np.concatenate([t.y for t in terms]))
    return at @ (w * (at.T.tocsr() @ v)) - c


@pytest.mark.parametrize(("n", "rows", "dtype"), [(500, [2, 40, 499, 500], np.int64),
                                                  (3000, [3, 70, 900, 3000], np.int32)])  # fmt: skip
def test_the_transposes_product_is_the_stored_transposes_bit_for_bit(
    n: int, rows: list[int], dtype: type
) -> None:
    """``Aᵀ r`` as the product of ``A``'s transpose (no second matrix) adds each variable's rows
    in the order the stored ``Aᵀ`` did: the same floating-point sums, not only close ones (rows
    as int32, as the fit keeps them, or int64)."""
    terms = [T(t.inv.astype(dtype), t.y, t.weight) for t in _terms(n, rows, 7)]
    for seed in range(3):
        v = np.random.default_rng(seed).normal(0, 3, n)
        got = TermsGradient(terms, n)(v)
        want = _stored_transpose(terms, n, v)
        np.testing.assert_array_equal(got, want)
    # the comparison tells a different order of the same sums apart: summing each variable's rows
    # in reverse term order differs in the last bits somewhere
    rev = _stored_transpose(terms[::-1], n, v)
    assert not np.array_equal(rev, want)


def test_no_terms_is_a_zero_gradient() -> None:
    np.testing.assert_array_equal(TermsGradient([], 4)(np.ones(4)), np.zeros(4))
