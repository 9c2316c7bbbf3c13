"""The dual route's large arrays formed by pieces or without copies
(:mod:`auditlib.simulate.sparse_coarse`): the same numbers bit for bit as the whole-length
formulas, so that a large problem's memory goes down without changing a release."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import sparse

from auditlib.simulate import sparse_coarse, sparse_sums
from auditlib.simulate.sparse_coarse import CoarseProx
from tests.unit._dhc_fits import _county_instance


def _rows(seed: int, n: int = 3_000, m: int = 400) -> sparse.csr_matrix:
    """A variables × rows matrix like the dual's: a few ±1 entries per variable."""
    rng = np.random.default_rng(seed)
    per = rng.integers(1, 6, n)
    indptr = np.concatenate(([0], np.cumsum(per)))
    indices = np.concatenate([np.sort(rng.choice(m, k, replace=False)) for k in per])
    data = rng.choice([-1.0, 1.0], indices.size)
    return sparse.csr_matrix((data, indices.astype(np.int32), indptr.astype(np.int32)), (n, m))


@pytest.mark.parametrize("piece", [1, 7, 1_000, 1 << 22])
def test_the_weighted_square_sums_by_pieces_are_one_bincount_bit_for_bit(
    piece: int, monkeypatch
) -> None:
    # d2 of the diagonal: Σ_i w_i · a_ij², float weights (1/segment size), so the order of the
    # additions matters; by pieces of `piece` entries (rows cut anywhere) it is the one pass's
    mat = _rows(1)
    w = 1.0 / np.random.default_rng(2).integers(1, 200, mat.shape[0])
    want = np.bincount(
        mat.indices,
        weights=mat.data * mat.data * np.repeat(w, np.diff(mat.indptr)),
        minlength=mat.shape[1],
    )
    monkeypatch.setattr(sparse_sums, "PIECE_ENTRIES", piece)
    got = sparse_sums.square_sums_by_row(mat, w, mat.shape[1])
    np.testing.assert_array_equal(got, want)


def test_the_pieces_order_is_what_keeps_the_sums_bit_for_bit() -> None:
    # power: adding per-piece bincounts (each from 0) instead changes some sums in their last bits
    mat = _rows(1)
    w = 1.0 / np.random.default_rng(2).integers(1, 200, mat.shape[0])
    ww = mat.data * mat.data * np.repeat(w, np.diff(mat.indptr))
    want = np.bincount(mat.indices, weights=ww, minlength=mat.shape[1])
    other = np.zeros(mat.shape[1])
    for a in range(0, ww.size, 7):
        other += np.bincount(mat.indices[a : a + 7], weights=ww[a : a + 7], minlength=other.size)
    assert not np.array_equal(other, want)
    np.testing.assert_allclose(other, want, rtol=1e-12)


@pytest.mark.parametrize("piece", [1, 50, 1 << 22])
def test_the_square_sums_and_gram_by_pieces_are_the_whole_products(piece: int, monkeypatch) -> None:
    mat = _rows(3)
    monkeypatch.setattr(sparse_sums, "PIECE_ENTRIES", piece)
    np.testing.assert_array_equal(
        sparse_sums.square_sums(mat, mat.shape[1]), np.asarray(abs(mat).sum(axis=0)).ravel()
    )
    gram = sparse_sums.gram(mat)
    want = (mat.T @ mat).toarray()
    np.testing.assert_array_equal(gram.toarray(), want)
    assert gram.nnz == np.count_nonzero(want)  # exact zeros dropped, as in one product


def test_the_segment_selector_is_the_coo_matrix_it_replaces() -> None:
    s = np.random.default_rng(5).integers(0, 37, 2_000)
    s = np.unique(s, return_inverse=True)[1].astype(np.int64)
    n = int(s.max()) + 1
    got = sparse_sums.SegmentSums(_rows(4, n=s.size), s, n).selector(0, s.size)
    want = sparse.csr_matrix((np.ones(s.size), (s, np.arange(s.size))), shape=(n, s.size))
    for name in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))


def _county_prox() -> tuple[CoarseProx, np.ndarray]:
    """The coarse proximal step of a County fit, and a projection at which some variables are 0."""
    fit, terms = _county_instance(8, 11)
    big = [t for t in terms if int(np.bincount(t.inv).max()) > sparse_coarse.COARSE_ROW]
    assert fit.group is not None and fit.lower is not None
    gv = np.arange(fit.unit.size, dtype=np.int64)
    bt, c, inv_w, bounded = sparse_coarse.constraint_rows(
        fit.unit.size, [t.inv for t in big], [t.y for t in big], [t.weight for t in big],
        gv, fit.group, fit.lower,
    )  # fmt: skip
    from auditlib.simulate.postprocess import Segments

    assert sparse_sums.one_unit_rows(bt, fit.unit)
    prox = CoarseProx(
        Segments(fit.segment, fit.target), fit.segment, bt, c, inv_w, bounded, 3.0, 1e-6,
        unit=fit.unit,
    )  # fmt: skip
    x = prox.proj.project(np.random.default_rng(6).normal(size=fit.unit.size) * 5)
    assert 0 < np.count_nonzero(x) < x.size
    return prox, x


def test_the_preconditioner_on_some_rows_is_the_one_on_copies_of_their_columns() -> None:
    # fixed bounds' rows are left out of the Newton system: the preconditioner built from the
    # whole matrices restricted to the free rows is the one built from copies of their columns
    prox, x = _county_prox()
    bf, s, cnt, shift, sums = prox._parts(x)
    m = prox.c.size
    rows = np.flatnonzero(~prox.bounded | (np.arange(m) % 3 == 0))
    assert 0 < rows.size < m
    kind = np.arange(m) % 17
    cols = bf[:, rows].tocsr()
    copies = prox._preconditioner(
        cols, sparse_sums.SegmentSums(cols, s, cnt.size), cnt, shift[rows], kind[rows]
    )
    whole = prox._preconditioner(bf, sums, cnt, shift[rows], kind[rows], rows)
    v = np.random.default_rng(7).normal(size=rows.size)
    np.testing.assert_array_equal(whole(v), copies(v))


def test_a_county_fit_is_the_same_whatever_the_pieces(monkeypatch) -> None:
    # the whole fit by the dual's conjugate gradients (fixed bounds' rows among its steps):
    # the same point bit for bit with pieces of 64 entries as in one piece
    fit, terms = _county_instance(8, 11)
    monkeypatch.setattr(sparse_coarse, "DENSE_ROWS", 0)
    seen: list[bool] = []
    pre = CoarseProx._preconditioner

    def spy(self, bf, sums, cnt, shift, kind, rows=None):  # type: ignore[no-untyped-def]
        seen.append(rows is not None)
        return pre(self, bf, sums, cnt, shift, kind, rows)

    monkeypatch.setattr(CoarseProx, "_preconditioner", spy)
    x_one, _ = fit.solve(terms, max_iter=5000, tol=1e-6)
    assert fit.route == "dual" and any(seen)  # some steps with bounds' rows fixed
    monkeypatch.setattr(sparse_sums, "PIECE_ENTRIES", 64)
    x_pieces, _ = fit.solve(terms, max_iter=5000, tol=1e-6)
    np.testing.assert_array_equal(x_pieces, x_one)


def _sums_and_kinds(piece: int, monkeypatch) -> tuple:  # type: ignore[no-untyped-def]
    prox, x = _county_prox()
    monkeypatch.setattr(sparse_sums, "PIECE_ENTRIES", piece)
    bf, s, cnt, _, sums = prox._parts(x)
    assert prox.unit is not None
    z = sparse.csr_matrix(
        (np.ones(bf.shape[1]), (np.arange(bf.shape[1]), np.arange(bf.shape[1]) % 23))
    )
    return prox, x, bf, s, cnt, sums, z


@pytest.mark.parametrize("piece", [1, 300, 5_000])
def test_the_segment_sums_by_pieces_of_units_are_the_whole_products_bit_for_bit(
    piece: int, monkeypatch
) -> None:
    # a County's rows' sums per parent cell by pieces of whole units: the diagonal's second sum
    # and (S B)ᵀ diag(1/cnt) (S B) Z (float weights: the order of the additions matters) are
    # the whole product's numbers
    _, _, bf, s, cnt, sums, z = _sums_and_kinds(piece, monkeypatch)
    assert len(sums.bounds) > 2
    whole = (sparse_sums.SegmentSums(bf, s, cnt.size).selector(0, s.size) @ bf).tocsr()
    w = 1.0 / np.maximum(cnt, 1.0)
    want_d2 = np.bincount(
        whole.indices, weights=whole.data**2 * np.repeat(w, np.diff(whole.indptr)),
        minlength=bf.shape[1],
    )  # fmt: skip
    got_d2 = np.zeros(bf.shape[1])
    for p in sums.pieces():
        sparse_sums.square_sums_by_row(p, w, bf.shape[1], out=got_d2)
    np.testing.assert_array_equal(got_d2, want_d2)
    want = (whole.T @ (sparse.diags(w) @ (whole @ z))).toarray()
    np.testing.assert_array_equal(sums.weighted_gram(w, z).toarray(), want)


def test_pieces_of_segments_would_change_the_weighted_gram(monkeypatch) -> None:
    # power: the same product summed over pieces of segments (each piece's sums from 0) differs
    # from the whole in some last bits: pieces must hold each row's additions whole
    *_, cnt, sums, z = _sums_and_kinds(1 << 22, monkeypatch)
    whole = sums.whole()
    w = 1.0 / np.maximum(cnt, 1.0)
    wsz = (sparse.diags(w) @ (whole @ z)).tocsr()
    want = (whole.T @ wsz).toarray()
    cuts = [*range(0, cnt.size, 40), cnt.size]
    other = np.zeros_like(want)
    for a, b in itertools.pairwise(cuts):
        other += (whole[a:b].T @ wsz[a:b]).toarray()
    assert not np.array_equal(other, want)
    np.testing.assert_allclose(other, want, rtol=1e-12, atol=1e-12)


def test_rows_of_several_units_or_units_out_of_order_are_seen() -> None:
    prox, _ = _county_prox()
    assert prox.unit is not None
    assert sparse_sums.one_unit_rows(prox.bt, prox.unit)
    assert not sparse_sums.one_unit_rows(prox.bt, prox.unit[::-1].copy())
    shifted = prox.unit.copy()
    shifted[np.flatnonzero(np.diff(shifted))[0]] += 1  # a unit's last variable given to the next
    assert not sparse_sums.one_unit_rows(prox.bt, shifted)
