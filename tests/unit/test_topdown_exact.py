"""What the TopDown solver's faster paths keep of the releases.

- The children projection gives the same bits as the implementation it replaced (kept here as
  :class:`ReferenceChildSegments`): projection by projection, warm starts included, and through the
  WLS solver.
- A level fitted whole (``wls.RUN_UNITS`` at least its units: every level of up to 8,192
  units, and any level with the run size raised) gives the previous implementation's releases bit for
  bit: against the reference run in the same process, and against digests of the releases the
  previous implementation gave.
- A larger level is fitted run of parents by run, each run with its own FISTA stopping rule at the
  same tolerance: the real-valued fit moves by about the tolerance's effect on the optimum, a few
  released integers change, and the released distribution does not (paired tests with fixed seeds
  against the whole fit, whose power is shown on a 2 % change of the block noise variance).
"""

from __future__ import annotations

import hashlib

import numpy as np
import numpy.typing as npt
import pytest

from auditlib import seeds
from auditlib.allocations import load_allocation
from auditlib.exceptions import InvalidParameterError
from auditlib.geography.populations import spine_state_histograms
from auditlib.geography.schema import schema
from auditlib.geography.spine import LEVELS, generate_spine
from auditlib.simulate import topdown, wls
from auditlib.simulate.postprocess import ChildSegments, Segments, _check_segments
from auditlib.simulate.topdown import TOPDOWN_NOISE, allocation_measured, spine_state
from auditlib.simulate.wls import solve_wls_children, solve_wls_normal


class ReferenceChildSegments:
    """The children projection as first written (each step repeats the thresholds into a fresh
    array; the layout checked through the full segment array)."""

    def __init__(self, parent: npt.ArrayLike, target: npt.ArrayLike) -> None:
        from scipy import sparse

        par = np.asarray(parent, dtype=np.int64).ravel()
        tgt = np.asarray(target, dtype=np.float64)
        n_par, n_cells = tgt.shape
        if par.size and (np.diff(par) < 0).any():
            raise InvalidParameterError("Invalid parent: units must be grouped by parent (sorted)")
        seg = (par[:, None] * n_cells + np.arange(n_cells)).ravel()
        _, flat = _check_segments(seg.size, seg, tgt)
        self.parent, self.target = par, flat.reshape(n_par, n_cells)
        self.sizes = np.bincount(par, minlength=n_par)
        has = self.sizes > 0
        self.has = has
        self.width = int(self.sizes.max(initial=0))
        rows = (np.cumsum(has) - 1)[par]
        self._sum = sparse.csr_matrix(
            (np.ones(par.size), rows, np.arange(par.size + 1)), shape=(par.size, int(has.sum()))
        ).T.tocsr()
        self.tau = None
        self._scratch = None

    def _project(self, v, out):
        return self.project(v, out=out)

    def project(self, y, out=None):
        v = np.asarray(y, dtype=np.float64)
        n_units, n_cells = self.parent.size, self.target.shape[1]
        total = self._sum
        t = self.target[self.has]
        lower = (total @ v - t) / self.sizes[self.has][:, None]
        zero = t == 0
        lower[zero] = np.inf
        tau = lower if self.tau is None else self.tau
        if self._scratch is None:
            self._scratch = np.empty_like(v)
        act = self._scratch
        d = np.empty_like(v) if out is None or out.shape != v.shape or out is v else out
        slack = 1e-11 * (1.0 + t)
        counts = self.sizes[self.has]
        for it in range(self.width + 3):
            np.subtract(v, np.repeat(tau, counts, axis=0), out=d)
            np.maximum(d, 0.0, out=d)
            gap = total @ d - t
            if np.all(np.abs(gap) <= slack):
                self.tau = tau
                return d
            np.sign(d, out=act)
            active = total @ act
            step = np.divide(gap, active, out=np.zeros_like(gap), where=active > 0)
            tau = tau + step
            if it == 0:
                stuck = (active == 0) & ~zero
                tau = np.where(stuck, lower, np.maximum(tau, lower))
        seg = (self.parent[:, None] * n_cells + np.arange(n_cells)).ravel()
        self.tau = None
        return Segments(seg, self.target).project(v).reshape(n_units, n_cells)


def _instance(seed: int, n_par: int = 40, n_cells: int = 7):
    """Parents with 0..60 children (a childless parent has target 0), targets often 0, values
    mostly below the thresholds (as at the block level), some far above."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 60, n_par)
    sizes[0] = max(sizes[0], 1)
    parent = np.repeat(np.arange(n_par), sizes)
    target = rng.integers(0, 40, (n_par, n_cells)).astype(float)
    target[rng.random(target.shape) < 0.3] = 0.0
    target[sizes == 0] = 0.0
    y = rng.normal(-0.5, 2.0, (parent.size, n_cells)) ** 3 / 4
    return parent, target, y


@pytest.mark.parametrize("seed", range(8))
def test_child_projection_is_the_reference_bit_for_bit(seed):
    """A run of warm-started projections (as the solver makes them): identical arrays and
    thresholds at every step, inputs moving a little, a lot, and across every value."""
    parent, target, y = _instance(seed)
    new, ref = ChildSegments(parent, target), ReferenceChildSegments(parent, target)
    rng = np.random.default_rng(100 + seed)
    moves = [0.0, 0.01, 0.3, 3.0, 1000.0, -1000.0, 0.05, 0.0]
    for j, scale in enumerate(moves):
        v = y + scale * (rng.normal(size=y.shape) if abs(scale) < 100 else 1.0)
        out_new = np.empty_like(v) if j % 2 else None
        a = new.project(v, out=out_new)
        b = ref.project(v)
        assert a.tobytes() == b.tobytes(), f"step {j}"
        assert new.tau is not None and ref.tau is not None
        assert new.tau.tobytes() == ref.tau.tobytes()


@pytest.mark.parametrize("seed", range(3))
def test_children_solver_is_the_segment_solver_bit_for_bit(seed, monkeypatch):
    """``solve_wls_children`` (the layout from the parents) against ``solve_wls_normal`` on the
    segment array with the reference projection."""
    parent, target, _ = _instance(seed, n_par=30, n_cells=28)
    sch = schema("pl94")
    rng = np.random.default_rng(seed)
    hess = np.zeros((28, 28))
    for q in sch.query_names:
        m = sch.query_matrix(q).astype(float)
        hess += m.T @ m / rng.uniform(1.0, 30.0)
    b = rng.normal(0.5, 3.0, (parent.size, 28))
    new = solve_wls_children(hess, b.copy(), parent, target)
    monkeypatch.setattr(wls, "ChildSegments", ReferenceChildSegments)
    seg = parent[:, None] * 28 + np.arange(28)
    ref = solve_wls_normal(hess, b.copy(), seg, target)
    assert new.iterations == ref.iterations > 1
    assert new.x.tobytes() == ref.x.tobytes()


@pytest.mark.parametrize(
    ("parent", "target", "match"),
    [
        ([0, 0, 2], np.ones((2, 3)), r"segment ids in \[0, 8\]; need 0..5"),
        ([0, 0], np.array([[1.0, np.nan, 1.0]]), "target nan"),
        ([0, 0], np.array([[1.0, -2.0, 1.0]]), "target -2"),
        ([0, 0, 2], np.array([[1.0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 3.0, 0]]), "segment 10 "),
    ],
)
def test_child_layout_checks_say_what_the_segment_checks_say(parent, target, match):
    seg = (np.asarray(parent)[:, None] * 3 + np.arange(3)).ravel()
    with pytest.raises(InvalidParameterError, match=match) as ref:
        _check_segments(seg.size, seg, target)
    with pytest.raises(InvalidParameterError, match=match) as new:
        ChildSegments(parent, target)
    assert str(new.value) == str(ref.value)
    with pytest.raises(InvalidParameterError, match="one per row"):
        solve_wls_children(np.eye(3), np.zeros((4, 3)), [0, 0], np.ones((1, 3)))


SEED = 20200325


_RELEASES: dict[str, list[npt.NDArray]] = {}


def _new_release(rounding: str) -> list[npt.NDArray]:
    """:func:`_release`, once per module."""
    if rounding not in _RELEASES:
        _RELEASES[rounding] = _release(rounding)
    return _RELEASES[rounding]


def _release(rounding: str, run_units: int = 10**9, block_scale: float = 1.0) -> list[npt.NDArray]:
    """Puerto Rico (41,987 blocks) over ``pl94`` as the audit measures it, one replicate; levels
    fitted in runs of ``run_units`` (default: whole, the previous fit), the block level's σ²
    multiplied by ``block_scale``."""
    return _release_full(rounding, run_units, block_scale).dp


def pl94_production(
    levels: tuple[str, ...], neighbours: str
) -> tuple[dict[str, npt.NDArray[np.int8]], list[list[tuple[str, float]]]]:
    """The ``pl94`` schema's query matrices and the PL94-171 production allocation's measurements
    (query, σ²) at each of ``levels`` under ``neighbours``, as the audit measures them: the
    allocation's ``cenrace`` is the schema's ``race``, and the schema has no group quarters."""
    sch = schema("pl94")
    queries = {q: sch.query_matrix(q) for q in sch.query_names}
    measured = allocation_measured(
        load_allocation("pl94_2021_production"),
        levels,
        sch.query_names,
        neighbours,
        attribute_aliases={"cenrace": "race"},
        detailed_as=" * ".join(sch.attribute_names),
        skip=("hhgq", "hhinstlevels"),
    )
    return queries, measured


def _release_full(
    rounding: str, run_units: int = 10**9, block_scale: float = 1.0
) -> topdown.TopDownRelease:
    sch = schema("pl94")
    queries, measured = pl94_production(LEVELS, "bounded")
    spine = generate_spine(SEED, regions=("PR",))
    h, _ = spine_state(spine, 0)
    hist = spine_state_histograms(spine, 0, sch, SEED)
    measured[-1] = [(q, s2 * block_scale) for q, s2 in measured[-1]]
    rngs = [seeds.rng(SEED, TOPDOWN_NOISE, 1, i, 0) for i in range(len(h.levels))]
    kept = wls.RUN_UNITS
    wls.RUN_UNITS = run_units
    try:
        return topdown.topdown(h, hist, queries, measured, rngs, rounding=rounding)  # type: ignore[arg-type]
    finally:
        wls.RUN_UNITS = kept


def test_spine_state_release_is_the_reference_bit_for_bit(monkeypatch):
    """The real-valued release (``rounding="none"``) with every level fitted whole: every level's
    solution bit for bit, not only what rounding makes of it."""
    new = _new_release("none")

    def reference_solve(hess, b, parent, parent_hist, *, tol):
        seg = parent[:, None] * hess.shape[0] + np.arange(hess.shape[0])
        return solve_wls_normal(hess, b, seg, parent_hist, tol=tol)

    monkeypatch.setattr(wls, "ChildSegments", ReferenceChildSegments)
    monkeypatch.setattr(topdown, "solve_wls_children", reference_solve)
    ref = _release("none")
    assert [a.tobytes() == b.tobytes() for a, b in zip(new, ref, strict=True)] == [True] * 5


#: SHA-256 (first 16 hex digits) of each level's released histograms (State first) of
#: :func:`_release` (every level fitted whole), as the implementation before the faster projection
#: released them (numpy 2.4, OpenBLAS, x86_64; the real-valued releases' last bits follow the BLAS
#: build). The rounded Block level changed once since, on purpose: the rounders snap their inputs
#: to ``postprocess.ROUNDING_GRID`` so that near-ties are ties broken by position (the same
#: integers whatever the BLAS); the four levels above kept their digests through that change.
PREVIOUS_DIGESTS = {
    "controlled": [
        "52780b4c184a7a36",
        "b67b2fb2b3d27f07",
        "8cbd235eed0205c8",
        "2f05e1ab06bc97e1",
        "70dbd0bb8de1a45a",
    ],
    "none": [
        "c978a94f62e40106",
        "f3aacafa85e450e6",
        "b23996bd1ea57e59",
        "e57c91a08aeffc30",
        "c79f137e655b495a",
    ],
}


@pytest.mark.parametrize("rounding", ["controlled", "none"])
def test_spine_state_release_is_the_previous_release(rounding):
    got = [
        hashlib.sha256(np.ascontiguousarray(d).tobytes()).hexdigest()[:16]
        for d in _new_release(rounding)
    ]
    assert got == PREVIOUS_DIGESTS[rounding]


def _levels_consistent(rel: topdown.TopDownRelease, parents) -> None:
    """Integer, non-negative, the state total exact, children summing to their parent in every cell."""
    assert all(d.dtype == np.int64 and d.min() >= 0 for d in rel.dp)
    assert rel.dp[0].sum() == rel.truth[0].sum()
    for i, p in enumerate(parents):
        up = np.zeros_like(rel.dp[i])
        np.add.at(up, p, rel.dp[i + 1])
        np.testing.assert_array_equal(up, rel.dp[i])


def _paired_z(a: npt.NDArray, b: npt.NDArray, truth: npt.NDArray) -> list[float]:
    """z-scores of the paired differences of two releases' residuals (same noise): the mean
    residual and the mean squared residual, of the cells true 0 and of the others."""
    out = []
    for cls in (truth == 0, truth > 0):
        ra, rb = (a - truth)[cls].astype(float), (b - truth)[cls].astype(float)
        for e in (ra - rb, ra**2 - rb**2):
            sd = e.std()
            out.append(0.0 if sd == 0 else float(e.mean() / (sd / np.sqrt(e.size))))
    return out


def test_run_by_run_fit_keeps_the_released_distribution():
    """Puerto Rico with runs of 256 units (its tracts, block groups and blocks split into 4–164
    runs, each fitted and stopped on its own) against the whole fit, the same noise: every
    invariant holds; the real-valued fits differ by about the solver's tolerance; a few released
    cells change (under 0.5 % at every level); the mean residual and the mean squared residual of
    the cells true 0 and of the others are not moved (paired z within ±4 at Tract, Block_Group and
    Block). The same statistics move by |z| > 8 when the block level's noise variance is 2 % larger
    (again the same noise words): the test has power against far smaller changes than a wrong fit
    would make."""
    whole = _release_full("controlled")
    split = _release_full("controlled", run_units=256)
    h = spine_state(generate_spine(SEED, regions=("PR",)), 0)[0]
    _levels_consistent(split, h.parents)
    real_whole, real_split = _release("none"), _release("none", run_units=256)
    moved = [float(np.abs(a - b).max()) for a, b in zip(real_whole, real_split, strict=True)]
    assert moved[:2] == [0.0, 0.0] and 0 < max(moved) < 0.1  # State, County: one run each
    changed = [float((a != b).mean()) for a, b in zip(whole.dp, split.dp, strict=True)]
    assert max(changed) < 0.005 and max(changed[2:]) > 0
    for lv in (2, 3, 4):
        z = _paired_z(split.dp[lv], whole.dp[lv], whole.truth[lv])
        assert max(abs(v) for v in z) < 4, (lv, z)
    louder = _release("controlled", block_scale=1.02)
    z = _paired_z(louder[4], whole.dp[4], whole.truth[4])
    assert min(abs(v) for v in z) > 8, z


def test_default_run_size_release_keeps_every_invariant():
    """The default runs (8,192 units: Puerto Rico's block level in 6 runs): every invariant, and
    the levels of fewer units the whole fit's bits."""
    whole, rel = _new_release("controlled"), _release_full("controlled", wls.RUN_UNITS)
    _levels_consistent(rel, spine_state(generate_spine(SEED, regions=("PR",)), 0)[0].parents)
    assert [a.tobytes() == b.tobytes() for a, b in zip(whole[:4], rel.dp[:4], strict=True)] == [
        True
    ] * 4
