"""The sort-free projection onto ``{x ≥ 0, Σ_segment x = target}`` (``Segments.project``,
:mod:`auditlib.simulate.projection`): the exact projection, as a plain per-segment sort computes it,
on uneven segmentations (1 to 5,000 values, heavily skewed), ties, zero targets and one-value
segments; the optimality conditions; warm starts giving the cold result bit for bit; the sort that
finishes segments still moving after ``MAX_STEPS`` steps; and no sort otherwise."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from auditlib.exceptions import InvalidParameterError
from auditlib.simulate import projection
from auditlib.simulate.postprocess import Segments, project_simplex


def reference(v: npt.NDArray, seg: npt.NDArray, target: npt.NDArray) -> npt.NDArray:
    """The projection segment by segment: sort the values descending, ``ρ`` the last ``j`` with
    ``u_j > (Σ_{i ≤ j} u_i − t) / j``, ``τ = (Σ_{i ≤ ρ} u_i − t) / ρ``, ``x = max(v − τ, 0)``."""
    x = np.zeros_like(v)
    order = np.argsort(seg, kind="stable")
    bounds = np.searchsorted(seg[order], np.arange(target.size + 1))
    for s in range(target.size):
        idx = order[bounds[s] : bounds[s + 1]]
        if not idx.size or target[s] == 0:
            continue
        u = np.sort(v[idx])[::-1]
        css = np.cumsum(u)
        rho = 1
        for j in range(1, u.size + 1):
            if u[j - 1] - (css[j - 1] - target[s]) / j > 0:
                rho = j
        tau = (css[rho - 1] - target[s]) / rho
        x[idx] = np.maximum(v[idx] - tau, 0.0)
    return x


def uneven(seed: int, m: int = 300) -> tuple[npt.NDArray, npt.NDArray, npt.NDArray]:
    """Segments of 1 to 5,000 values (Pareto sizes: most of a few values, some of thousands; a few
    empty, with target 0), ids shuffled; targets 0 for 30 %; heavy-tailed values, mostly below the
    thresholds (as FISTA's iterates at the block level), some far above."""
    rng = np.random.default_rng(seed)
    sizes = np.minimum((rng.pareto(0.7, m) + 1).astype(np.int64), 5000)
    sizes[:3] = [5000, 1, 0]
    sizes[rng.random(m) < 0.02] = 0
    seg = np.repeat(np.arange(m), sizes)
    rng.shuffle(seg)
    target = rng.integers(0, 60, m).astype(float) * rng.random(m) ** 2 * 5
    target[rng.random(m) < 0.3] = 0.0
    target[sizes == 0] = 0.0
    v = rng.normal(-0.5, 2.0, seg.size) ** 3 / 4
    return v, seg, target


def scale_of(v: npt.NDArray, target: npt.NDArray) -> float:
    return max(float(np.abs(v).max(initial=0.0)), float(target.max(initial=0.0)), 1e-300)


def close(x: npt.NDArray, ref: npt.NDArray, v: npt.NDArray, target: npt.NDArray) -> None:
    """Equal to 1e-12 of the largest value or target: the rounding of the sums."""
    scale = scale_of(v, target)
    np.testing.assert_allclose(x, ref, rtol=0, atol=1e-12 * scale)


def check_kkt(x, v, seg, target, tau) -> None:
    """``x ≥ 0``; every segment sums to its target; ``x_i > 0 ⇒ v_i − τ_s = x_i``; ``x_i = 0 ⇒ v_i
    ≤ τ_s``; segments with target 0 are exactly 0."""
    eps = 1e-12 * scale_of(v, target)
    assert (x >= 0).all()
    np.testing.assert_allclose(np.bincount(seg, x, target.size), target, rtol=0, atol=eps)
    on = x > 0
    np.testing.assert_allclose(v[on] - tau[seg[on]], x[on], rtol=0, atol=eps)
    assert (v[~on] <= tau[seg[~on]] + eps).all()
    assert (x[target[seg] == 0] == 0).all()


@pytest.mark.parametrize("seed", range(6))
def test_uneven_segments_are_the_sorting_reference(seed):
    v, seg, target = uneven(seed)
    segs = Segments(seg, target)
    x = segs.project(v)
    close(x, reference(v, seg, target), v, target)
    assert segs.tau is not None
    check_kkt(x, v, seg, target, segs.tau)


@pytest.mark.parametrize("seed", range(4))
def test_ties_zero_targets_and_one_value_segments(seed):
    """Integer values with many ties (thresholds landing on values), integer targets, half of the
    segments of one value (x = the target whatever the value)."""
    rng = np.random.default_rng(50 + seed)
    m = 400
    sizes = np.where(rng.random(m) < 0.5, 1, rng.integers(2, 40, m))
    seg = np.repeat(np.arange(m), sizes)
    rng.shuffle(seg)
    v = rng.integers(-3, 4, seg.size).astype(float)
    target = rng.integers(0, 8, m).astype(float)
    x = project_simplex(v, seg, target)
    np.testing.assert_allclose(x, reference(v, seg, target), rtol=0, atol=1e-12)
    one = np.flatnonzero(sizes == 1)
    np.testing.assert_allclose(x[np.isin(seg, one)], target[seg[np.isin(seg, one)]], atol=1e-12)
    # all values equal: the target shared evenly; target 0: all zero
    assert project_simplex([2.0, 2.0, 2.0, 5.0], [0, 0, 0, 1], [1.5, 0.0]).tolist() == [
        0.5,
        0.5,
        0.5,
        0.0,
    ]


def multiscale(seed: int = 7) -> tuple[npt.NDArray, npt.NDArray, npt.NDArray]:
    """Segments of values of 1e-9 to 1e12 (each segment its own scale, values 0.1 to 10 times
    it), targets from 1e-3 to 1e3 times the scale."""
    rng = np.random.default_rng(seed)
    m = 120
    scale = 10.0 ** rng.integers(-9, 13, m).astype(float)
    seg = np.repeat(np.arange(m), rng.integers(1, 60, m))
    rng.shuffle(seg)
    v = rng.normal(0.0, 1.0, seg.size) * 10.0 ** rng.integers(-1, 2, seg.size) * scale[seg]
    target = rng.random(m) * 10.0 ** rng.integers(-3, 4, m) * scale
    return v, seg, target


def check_each_segment(v: npt.NDArray, seg: npt.NDArray, target: npt.NDArray) -> None:
    """The projection exact to 1e-12 of each segment's own scale (and its KKT conditions)."""
    segs = Segments(seg, target)
    x = segs.project(v)
    ref = reference(v, seg, target)
    assert segs.tau is not None
    for s in range(target.size):
        on = seg == s
        close(x[on], ref[on], v[on], target[s : s + 1])
        check_kkt(x[on], v[on], np.zeros(on.sum(), int), target[s : s + 1], segs.tau[s : s + 1])


def test_huge_and_tiny_values():
    """Segments of values of 1e-9 to 1e12 side by side: each exact to its own scale."""
    check_each_segment(*multiscale())


@pytest.mark.parametrize("seed", range(4))
def test_warm_start_gives_the_cold_result_bit_for_bit(seed):
    """One Segments projecting a sequence of inputs (each starting from the last thresholds) gives
    what a fresh Segments gives for each: inputs moving a little, a lot, all down (no value above
    the last thresholds), all up, and back."""
    v, seg, target = uneven(seed, m=200)
    warm = Segments(seg, target)
    rng = np.random.default_rng(200 + seed)
    for j, move in enumerate([0.0, 1e-3, 0.1, 3.0, -1e4, 1e4, 0.0, 1e-6]):
        y = v + (move if abs(move) >= 1e4 else move * rng.normal(size=v.size))
        a = warm.project(y)
        cold = Segments(seg, target)
        b = cold.project(y)
        assert a.tobytes() == b.tobytes(), f"step {j}"
        assert warm.tau is not None and cold.tau is not None
        assert warm.tau.tobytes() == cold.tau.tobytes(), f"step {j}"
        close(a, reference(y, seg, target), y, target)


@pytest.mark.parametrize("steps", [0, 1, 2])
def test_segments_still_moving_are_finished_by_a_sort(steps, monkeypatch):
    """With the Newton steps cut to 0, 1, 2 the sort finishes the segments still moving: the same
    projection (cold and warm)."""
    monkeypatch.setattr(projection, "MAX_STEPS", steps)
    v, seg, target = uneven(11, m=200)
    segs = Segments(seg, target)
    for y in (v, v + 0.5, v):
        x = segs.project(y)
        close(x, reference(y, seg, target), y, target)
        assert segs.tau is not None
        check_kkt(x, v if y is v else y, seg, target, segs.tau)
    check_each_segment(*multiscale(8))  # the sort's thresholds finished within each segment


def test_projection_does_not_sort(monkeypatch):
    """The default number of steps finishes every segment here: no sort of the values."""

    def no_sort(*args, **kwargs):
        raise AssertionError("sorted")

    v, seg, target = uneven(3)
    segs = Segments(seg, target)
    for name in ("sort", "lexsort", "argsort", "partition", "argpartition", "unique"):
        monkeypatch.setattr(np, name, no_sort)
    x = segs.project(v)
    x2 = segs.project(v * 1.01)
    monkeypatch.undo()
    close(x, reference(v, seg, target), v, target)
    close(x2, reference(v * 1.01, seg, target), v, target)


@pytest.mark.parametrize(
    ("y", "match"),
    [
        ([1.0, -np.inf, 0.0], "values must be finite"),
        ([1.0, np.nan, 0.0], "values must be finite"),
        ([1.0, 2.0], "2 values for 3 ids"),
    ],
)
def test_bad_values_are_refused(y, match):
    with pytest.raises(InvalidParameterError, match=match):
        Segments([0, 0, 1], [1.0, 2.0]).project(y)


def test_empty_input_and_all_zero_targets():
    assert Segments([], [0.0]).project([]).size == 0
    x = Segments([1, 1, 0], [0.0, 0.0, 0.0]).project([5.0, -1.0, 3.0])
    assert x.tolist() == [0.0, 0.0, 0.0]
