"""The gradient of the sparse TopDown fit's least-squares terms (:mod:`auditlib.simulate.sparse_fit`)
as one sparse matrix: ``∇ ½ Σ_q w_q ‖Q_q v − y_q‖² = Aᵀ W (A v − y)`` with the terms' rows stacked
in ``A`` (each variable in one row of every term: ``A`` has as many non-zeros per column as there
are terms). Two compiled sparse products an iteration instead of a gather and a scatter per term:
about half the CPU of the per-term form on parts of 30,000 variables and ten terms (the DHC's),
a third less on 240,000 (benchmarks/README.md, "Sparse TopDown"). The sums run in another order
than the per-term form's, so a fit's iterates agree with it to rounding error, not bit for bit;
the releases compared (PL94 and DHC states of the test spine) were the same."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class _Term(Protocol):
    @property
    def inv(self) -> npt.NDArray[np.integer]: ...
    @property
    def y(self) -> FloatArray: ...
    @property
    def weight(self) -> float: ...


class TermsGradient:
    """``v ↦ Σ_t w_t Q_tᵀ (Q_t v − y_t)`` for ``terms`` over ``n`` variables (``Q_t v`` sums the
    variables of each row: ``bincount(inv_t, v)``).

    ``A`` is held once, row-major (CSR: each term's rows, each row's variables in increasing
    order); ``Aᵀ r`` is its transpose's product (scipy's CSC product, no copy). That product adds
    into each variable its rows' values in increasing row order, as the CSR product of a
    separately stored ``Aᵀ`` did, and every entry is 1: the gradient is the same bit for bit
    (``tests/unit/test_sparse_terms.py``), in half the memory (S32's DHC County: 14 M variables ×
    4 fine terms)."""

    def __init__(self, terms: Sequence[_Term], n: int) -> None:
        self.n = n
        self.empty = not terms
        if self.empty:
            return
        sizes = [int(t.y.size) for t in terms]
        rows, nnz = sum(sizes), n * len(terms)
        idx_type = np.int32 if max(rows, nnz) < 2**31 - 1 else np.int64
        # row r of term t holds the variables v with inv_t[v] = r, in increasing order (a stable
        # sort of inv_t); every variable is in one row of every term
        indptr = np.zeros(rows + 1, dtype=idx_type)
        counts = np.concatenate(
            [np.bincount(t.inv, minlength=s) for t, s in zip(terms, sizes, strict=True)]
        )
        np.cumsum(counts, out=indptr[1:])
        indices = np.empty(nnz, dtype=idx_type)
        for k, t in enumerate(terms):
            indices[k * n : (k + 1) * n] = np.argsort(t.inv, kind="stable")
        self.a = sp.csr_matrix((np.ones(nnz), indices, indptr), shape=(rows, n))
        self.w = np.concatenate(
            [np.full(s, float(t.weight)) for t, s in zip(terms, sizes, strict=True)]
        )
        self.c = self.a.T @ (self.w * np.concatenate([np.asarray(t.y, np.float64) for t in terms]))

    def __call__(self, v: FloatArray) -> FloatArray:
        if self.empty:
            return np.zeros(self.n)
        r = self.a @ v
        r *= self.w
        g = self.a.T @ r
        g -= self.c
        return np.asarray(g, dtype=np.float64)
