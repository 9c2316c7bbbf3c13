"""The sums over a large sparse matrix that the dual route of the sparse TopDown fit forms
(:mod:`auditlib.simulate.sparse_coarse`), by pieces of about :data:`PIECE_ENTRIES` entries: the
same numbers bit for bit as one pass over the whole matrix (the order of every floating-point
addition kept), without arrays as long as it (S32's DHC County: 16 M variables, ≈ 7 rows each).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import sparse

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: entries of the rows' matrix taken at a time by :func:`square_sums`, :func:`gram`,
#: :func:`one_unit_rows` and :class:`SegmentSums`
PIECE_ENTRIES = 1 << 22


def square_sums(bf: sparse.csr_matrix, m: int) -> FloatArray:
    """Per column the sum of its squared entries, ``PIECE_ENTRIES`` entries at a time (no array
    as long as the matrix). Its entries are ±1 (the rows' and the bounds'), so the sums are
    counts, exact in any order: the same as one pass."""
    out = np.zeros(m)
    for a in range(0, bf.indices.size, PIECE_ENTRIES):
        d = bf.data[a : a + PIECE_ENTRIES]
        out += np.bincount(bf.indices[a : a + PIECE_ENTRIES], weights=d * d, minlength=m)
    return out


def square_sums_by_row(
    mat: sparse.csr_matrix, row_weight: FloatArray, m: int, out: FloatArray | None = None
) -> FloatArray:
    """Per column ``Σ_i row_weight[i] · mat[i, j]²``: the sums of :func:`numpy.bincount` over all
    the entries at once (each column's terms added in the entries' order, from 0), by pieces of
    about ``PIECE_ENTRIES`` entries with :func:`numpy.add.at`, which adds in the same order: the
    same floating-point sums, with no weight array as long as the matrix. ``out``: added to it
    (the rows of a longer matrix after those already added: the same sums as that matrix's)."""
    out = np.zeros(m) if out is None else out
    ptr = mat.indptr
    ends = np.searchsorted(ptr, np.arange(PIECE_ENTRIES, int(ptr[-1]), PIECE_ENTRIES), "right")
    bounds = np.unique(np.concatenate(([0], ends - 1, [ptr.size - 1])))
    for r0, r1 in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        a, b = int(ptr[r0]), int(ptr[r1])
        w = mat.data[a:b] * mat.data[a:b]
        w *= np.repeat(row_weight[r0:r1], np.diff(ptr[r0 : r1 + 1]))
        np.add.at(out, mat.indices[a:b], w)
    return out


class SegmentSums:
    """The rows' sums per segment ``S B`` (``S`` the selector of the positive variables'
    segments ``s``, ``B`` their rows ``bf``). Held whole, it has as many entries as ``B`` (a
    parent cell's children are distinct units, a row is one unit's): S32's DHC County held it
    beside ``B`` in every Newton step. Given the variables' ``unit`` (non-decreasing, every row
    one unit's), it is made by pieces of whole units of about ``PIECE_ENTRIES`` entries of ``B``:
    a piece's sums are the whole product's columns of its units' rows, each entry's additions
    the same, in the segments' order, so every number made from them is the same bit for bit
    (``tests/unit/test_sparse_coarse_memory.py``)."""

    def __init__(
        self, bf: sparse.csr_matrix, s: IntArray, n: int, unit: IntArray | None = None
    ) -> None:
        self.bf, self.s, self.n = bf, s, n
        nv = bf.shape[0]
        self.bounds = [0, nv]
        if unit is not None and nv:
            ptr = bf.indptr
            want = np.searchsorted(ptr, np.arange(PIECE_ENTRIES, ptr[-1], PIECE_ENTRIES), "right")
            cut = np.searchsorted(unit, unit[np.minimum(want, nv - 1)], "right")  # next unit
            self.bounds = np.unique(np.concatenate(([0], cut, [nv]))).tolist()

    def selector(self, a: int, b: int) -> sparse.csr_matrix:
        """``S`` on the variables ``a..b−1`` (a 1 at ``(s[v], v − a)``), built as CSR directly
        (each row's columns increasing, as a COO matrix's conversion orders them)."""
        sv = self.s[a:b]
        idx_type = np.int32 if sv.size < np.iinfo(np.int32).max else np.int64
        indptr = np.zeros(self.n + 1, dtype=idx_type)
        np.cumsum(np.bincount(sv, minlength=self.n), out=indptr[1:])
        order = np.argsort(sv, kind="stable").astype(idx_type)
        return sparse.csr_matrix((np.ones(sv.size), order, indptr), shape=(self.n, sv.size))

    def pieces(self) -> Iterator[sparse.csr_matrix]:
        """``S B`` on each piece's variables (all the segments; the piece's units' rows)."""
        for a, b in zip(self.bounds[:-1], self.bounds[1:], strict=True):
            rows = self.bf if (a, b) == (0, self.bf.shape[0]) else self.bf[a:b]
            yield (self.selector(a, b) @ rows).tocsr()

    def whole(self) -> sparse.csr_matrix:
        """``S B`` at once."""
        return (self.selector(0, self.bf.shape[0]) @ self.bf).tocsr()

    def weighted_gram(self, w: FloatArray, z: sparse.csr_matrix) -> sparse.csr_matrix:
        """``(S B)ᵀ diag(w) (S B) z`` for ``z`` of 0/1 entries (the rows' kinds): ``(S B) z``
        summed over the pieces (integers: exact in any order), then each piece's rows of the
        product, whole in that piece."""
        sz: Any = None
        for p in self.pieces():
            sz = p @ z if sz is None else sz + p @ z
        wsz = (sparse.diags(w) @ sz).tocsr()
        out: Any = None
        for p in self.pieces():
            out = p.T @ wsz if out is None else out + p.T @ wsz
        return out


def one_unit_rows(bt: sparse.csr_matrix, unit: IntArray) -> bool:
    """Whether ``unit`` (each variable's) is non-decreasing and every row (column of ``bt``)
    holds one unit's variables, as the fit's rows do (a query's row is one unit's query cell, a
    bound one unit's type): what :class:`SegmentSums` needs to work by pieces of units."""
    if unit.size and not bool((unit[1:] >= unit[:-1]).all()):
        return False
    lo = np.full(bt.shape[1], np.iinfo(np.int64).max)
    hi = np.full(bt.shape[1], np.iinfo(np.int64).min)
    ptr = bt.indptr
    step = max(1, PIECE_ENTRIES // max(1, bt.nnz // max(bt.shape[0], 1)))
    for a in range(0, bt.shape[0], step):
        b = min(a + step, bt.shape[0])
        cols = bt.indices[ptr[a] : ptr[b]]
        units = np.repeat(unit[a:b], np.diff(ptr[a : b + 1]))
        np.minimum.at(lo, cols, units)
        np.maximum.at(hi, cols, units)
    used = hi >= lo
    return bool((lo[used] == hi[used]).all())


def gram(bf: sparse.csr_matrix) -> sparse.csc_matrix:
    """``BᵀB`` (CSC), over pieces of about ``PIECE_ENTRIES`` entries of ``B``'s rows (no copy of
    ``B`` transposed). Entries ±1: the sums are integers, exact in any order, and exact zeros are
    dropped, as in one product."""
    n = bf.shape[0]
    per_row = max(1, bf.indices.size // max(n, 1))
    step = max(1, PIECE_ENTRIES // per_row)
    out = sparse.csr_matrix((bf.shape[1], bf.shape[1]))
    for a in range(0, n, step):
        piece = bf[a : a + step]
        out = out + (piece.T.tocsr() @ piece)
    out.eliminate_zeros()
    return out.tocsc()
