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
    def inv(self) -> IntArray: ...
    @property
    def y(self) -> FloatArray: ...
    @property
    def weight(self) -> float: ...


class TermsGradient:
    """``v ↦ Σ_t w_t Q_tᵀ (Q_t v − y_t)`` for ``terms`` over ``n`` variables (``Q_t v`` sums the
    variables of each row: ``bincount(inv_t, v)``)."""

    def __init__(self, terms: Sequence[_Term], n: int) -> None:
        self.n = n
        self.empty = not terms
        if self.empty:
            return
        sizes = [int(t.y.size) for t in terms]
        off = np.cumsum([0, *sizes[:-1]])
        # Aᵀ row by row (variable-major: a variable's rows, one per term, in term order)
        cols_t = [np.asarray(t.inv, np.int64) + o for t, o in zip(terms, off, strict=True)]
        cols = np.stack(cols_t, axis=1)
        indices = cols.ravel()
        idx_type = np.int32 if max(sum(sizes), indices.size) < 2**31 - 1 else np.int64
        at = sp.csr_matrix(
            (
                np.ones(indices.size),
                indices.astype(idx_type),
                np.arange(0, indices.size + 1, len(terms), dtype=idx_type),
            ),
            shape=(n, sum(sizes)),
        )
        self.at = at
        self.a = at.T.tocsr()
        self.w = np.concatenate(
            [np.full(s, float(t.weight)) for t, s in zip(terms, sizes, strict=True)]
        )
        self.c = at @ (self.w * np.concatenate([np.asarray(t.y, np.float64) for t in terms]))

    def __call__(self, v: FloatArray) -> FloatArray:
        if self.empty:
            return np.zeros(self.n)
        r = self.a @ v
        r *= self.w
        g = self.at @ r
        g -= self.c
        return np.asarray(g, dtype=np.float64)
