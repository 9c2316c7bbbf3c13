"""Direct samples of any release on a pair of neighbouring histogram databases (D, D′).

A release is run ``R`` times on D and ``R`` times on D′, independently, and the released value of one
chosen (level, unit, query cell) is kept (:func:`release_samples`); :func:`released_values` is the
same black box on one database (``n`` runs from one generator), the sampler MPL tests
(:mod:`auditlib.mpl.census`). The releases are the simulation module's own, called, not rewritten:

* :class:`Allocation` — the noisy measurement of the cell: count + N_Z(0, σ²)
  (:func:`~auditlib.simulate.release.simulate_block`; clipped at 0 with ``"nonnegative"``).
* :class:`TopDown` — the TopDown-style release (:func:`~auditlib.simulate.topdown.topdown`) of the
  state holding the chosen unit, with ``measured`` (query, σ²) per level of the database. TopDown runs
  each state on its own, so the released value of a unit depends on its state only: a database of many
  states (the whole spine) is cut to that state (:meth:`HistogramDatabase.state`) — exact, and the
  only way to afford it. A change in another state leaves the law of the value unchanged.
* :class:`Hierarchical` — Flaxman's GDPC, RDPC or ADPC of the tree of one query cell (a root over
  the top level, then every level, as for a table in ``flows/spec/plan_tables.py``); GDPC and ADPC release the
  blocks, RDPC every level.
* :class:`Stratified` — Flaxman & Petti's SA3 (each block's total and its detailed cells as strata) or SA4
  (strata summing to the true total of each unit of the level above the blocks, the county); the
  released value is the block's total (query ``"total"``) or a stratum (query ``"detailed"``).

Vectorised where the release allows: ``n`` runs of the allocation, GDPC, ADPC and SA3 are one draw
of ``n`` independent copies of the unit (units are released independently); SA4's copies are ``n``
copies of the unit's county, TopDown's ``n`` copies of the state as ``n`` top units of one call (every
parent is solved on its own: the copies are independent runs). RDPC is run ``n`` times (raking
couples the whole tree).

Streams: chunk ``k`` (``chunk`` runs) of database ``b`` (0 = D, 1 = D′) draws from the keyed stream
``(DIRECT_RELEASE, release key, b, k)``: the same seed gives the same samples, D and D′ never share
a draw. :func:`release_range` gives any range of replicates of that run (each stream chunk it meets
drawn whole, then cut), so tasks of any size, anywhere, join into the same values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from auditlib import seeds
from auditlib.exceptions import InvalidParameterError
from auditlib.geography.attributes import DETAILED, TOTAL
from auditlib.mechanisms.base import check_rng, positive_finite
from auditlib.simulate.hierarchical import Algorithm, CountTree, adpc, gdpc, rdpc
from auditlib.simulate.neighbours_hist import HistogramDatabase, HistogramPair
from auditlib.simulate.noise import NoiseVariance
from auditlib.simulate.release import QueryPlan, simulate_block
from auditlib.simulate.stratified import invariant_release, stratified_release
from auditlib.simulate.topdown import StateHierarchy, topdown

#: keyed stream of direct samples: (DIRECT_RELEASE, release key, database, chunk)
DIRECT_RELEASE = 19
DEFAULT_CHUNK = 2_000

#: Most replicates of one direct experiment (:func:`release_range`, :func:`release_samples`): the
#: released values on D and D′ take 16 bytes a replicate (160 MB at the bound), and the cheapest
#: release runs about ten million times a second, the costliest (TopDown of a state) far slower.
MAX_REPLICATES = 10**7

#: Most memory one call of :func:`released_values` (``n`` runs at once, e.g. one stream chunk) may
#: take: 2 GiB. The runs are vectorised, so the peak is ``n`` × the values one run computes ×
#: :data:`BYTES_PER_VALUE`; a larger ``n`` is refused before any draw, naming the memory it would
#: need and the largest allowed ``n``.
MAX_RELEASE_BYTES = 2 * 2**30

#: Peak bytes per value a run computes, measured (``tracemalloc``): 106-113 for TopDown per
#: histogram cell of the state, about 108 for SA3 per cell of the block, 84 for SA4 per cell of the
#: county's blocks, 32-72 for one noisy count (allocation, GDPC, ADPC); RDPC runs one at a time.
BYTES_PER_VALUE = 128

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Allocation:
    """The noisy measurement N_Z(0, ``sigma2``) of the chosen cell (TopDown's measurement step);
    a :class:`~auditlib.simulate.noise.NoiseVariance` draws its own mechanism instead."""

    sigma2: float
    postprocess: Literal["none", "nonnegative"] = "none"
    key = 0


@dataclass(frozen=True)
class TopDown:
    """The TopDown-style release: per level of the database (top first) its measured (query, σ²)."""

    measured: tuple[tuple[tuple[str, float], ...], ...]
    tol: float = 1e-3
    key = 1

    @classmethod
    def of(cls, measured: Sequence[Sequence[tuple[str, float]]], tol: float = 1e-3) -> TopDown:
        def noise(s: float) -> float:  # a NoiseVariance names its mechanism: kept as it is
            return s if isinstance(s, NoiseVariance) else float(s)

        return cls(tuple(tuple((str(q), noise(s)) for q, s in lv) for lv in measured), tol)


@dataclass(frozen=True)
class Hierarchical:
    """Flaxman's ``algorithm`` ("gdpc", "rdpc", "adpc") at ``epsilon``; ADPC needs ``n_runs`` = P
    (Flaxman 2019: 4)."""

    algorithm: Algorithm
    epsilon: float
    n_runs: int | None = None

    def __post_init__(self) -> None:
        if self.algorithm == "adpc" and self.n_runs is None:
            raise InvalidParameterError(
                "Missing P (n_runs) of ADPC: it averages P runs at ε/P; pass "
                "Hierarchical('adpc', epsilon, n_runs) (Flaxman 2019: 4)"
            )

    @property
    def key(self) -> int:
        return 2 + ("gdpc", "rdpc", "adpc").index(self.algorithm)


@dataclass(frozen=True)
class Stratified:
    """Flaxman & Petti's ``"sa3"`` (ε₁ = ``epsilon`` on totals, ε₂ = ``epsilon_strata`` or ε on strata)
    or ``"sa4"`` (``epsilon`` on strata, county totals invariant)."""

    kind: Literal["sa3", "sa4"]
    epsilon: float
    epsilon_strata: float | None = None

    @property
    def key(self) -> int:
        return 5 if self.kind == "sa3" else 6


Release = Allocation | TopDown | Hierarchical | Stratified


@dataclass(frozen=True)
class Target:
    """The released value kept: cell ``cell`` of ``query`` of unit ``unit`` at ``level``."""

    level: int
    unit: int
    query: str = TOTAL
    cell: int = 0

    @classmethod
    def check(
        cls, db: HistogramDatabase, level: str | int, unit: int, query: str, cell: int
    ) -> Target:
        i = db.level_index(level)
        n = db.n_units(i)
        if isinstance(unit, bool) or not isinstance(unit, int | np.integer) or not 0 <= unit < n:
            raise InvalidParameterError(
                f"Invalid unit {unit!r} at {db.levels[i]!r}; allowed 0..{n - 1}"
            )
        q = db.schema.canonical_query(query)
        k = db.schema.n_query_cells(q)
        if isinstance(cell, bool) or not isinstance(cell, int | np.integer) or not 0 <= cell < k:
            raise InvalidParameterError(
                f"Invalid cell {cell!r} of query {q!r}; allowed 0..{k - 1} "
                f"({', '.join(db.schema.cell_labels(q)[:4])}, …)"
            )
        return cls(i, int(unit), q, int(cell))

    def truth(self, db: HistogramDatabase) -> int:
        return int(db.query_counts(self.level, self.query)[self.unit, self.cell])


def _allocation(
    r: Allocation, db: HistogramDatabase, t: Target, n: int, g: np.random.Generator
) -> FloatArray:
    # σ² of discrete Gaussian noise, or a NoiseVariance (an allocation file's other noise)
    s2 = r.sigma2 if isinstance(r.sigma2, NoiseVariance) else positive_finite("sigma2", r.sigma2)
    truth = np.full((n, 1), t.truth(db), dtype=np.int64)
    block = simulate_block([truth], [QueryPlan("cell", 1, 1, s2)], [0], [g], r.postprocess)
    return block.truth.astype(np.float64) + block.residual[0].astype(np.float64)


def values_per_run(release: Release, db: HistogramDatabase, t: Target) -> int:
    """How many values one run of ``release`` computes for the target (what ``n`` runs copy)."""
    if isinstance(release, TopDown):
        return int(_state_of(db, t)[0].histograms.size)
    if isinstance(release, Stratified):
        cells = int(db.histograms.shape[1])
        if release.kind == "sa4" and len(db.levels) > 1:
            county = db.parents[-1]
            return cells * int(np.count_nonzero(county == county[t.unit]))
        return cells
    return 1


def check_runs(n: int, release: Release, db: HistogramDatabase, t: Target, name: str = "n") -> int:
    """Refuse ``n`` runs at once whose peak memory would pass :data:`MAX_RELEASE_BYTES`, naming
    ``name`` (``n``, or the chunk of a replicate range), the memory it needs and the largest
    allowed."""
    per_run = values_per_run(release, db, t) * BYTES_PER_VALUE
    if n * per_run > MAX_RELEASE_BYTES:
        raise InvalidParameterError(
            f"Invalid {name}: {n} runs of {type(release).__name__} at once would need about "
            f"{n * per_run / 2**30:.1f} GiB ({per_run // BYTES_PER_VALUE} values per run); the "
            f"largest allowed is {MAX_RELEASE_BYTES // per_run} (MAX_RELEASE_BYTES = "
            f"{MAX_RELEASE_BYTES / 2**30:g} GiB per call)"
        )
    return n


def _state_of(db: HistogramDatabase, t: Target) -> tuple[HistogramDatabase, int]:
    """The state holding the target unit as its own database, and the unit's index there."""
    if db.n_top == 1:
        return db, t.unit
    top = np.arange(db.n_units(t.level), dtype=np.int64)
    for j in range(t.level - 1, -1, -1):
        top = db.parents[j][top]
    s = int(top[t.unit])
    sub, _ = db.state(s)
    return sub, int(np.searchsorted(np.flatnonzero(top == s), t.unit))


def _tiled(h: StateHierarchy, n: int) -> StateHierarchy:
    """``n`` copies of a one-state hierarchy as ``n`` top units."""
    parents = []
    for i, p in enumerate(h.parents):
        up = h.n_units(i)
        parents.append((p[None, :] + up * np.arange(n, dtype=np.int64)[:, None]).ravel())
    return StateHierarchy(h.levels, tuple(parents), n)


def _topdown(
    r: TopDown, db: HistogramDatabase, t: Target, n: int, g: np.random.Generator
) -> FloatArray:
    sub, unit = _state_of(db, t)
    sch = sub.schema
    matrices = {q: sch.query_matrix(q) for q in {q for lv in r.measured for q, _ in lv}}
    row = sch.query_matrix(t.query)[t.cell].astype(np.int64)
    units = sub.n_units(t.level)
    rel = topdown(
        _tiled(sub.hierarchy, n),
        np.tile(sub.histograms, (n, 1)),
        matrices,
        r.measured,
        [g] * len(sub.levels),
        tol=r.tol,
    )
    return (rel.dp[t.level].reshape(n, units, -1)[:, unit, :] @ row).astype(np.float64)


def count_tree(db: HistogramDatabase, query: str = TOTAL, cell: int = 0) -> CountTree:
    """Flaxman's tree of one query cell: a root over the top level, then every level."""
    counts = [np.asarray(db.query_counts(i, query)[:, cell]) for i in range(len(db.levels))]
    root = np.array([counts[0].sum()], dtype=np.int64)
    parents = [np.zeros(db.n_top, dtype=np.int64), *db.parents]
    return CountTree((root, *counts), tuple(parents))


def _hierarchical(
    r: Hierarchical, db: HistogramDatabase, t: Target, n: int, g: np.random.Generator
) -> FloatArray:
    last = len(db.levels) - 1
    if r.algorithm != "rdpc" and t.level != last:
        raise InvalidParameterError(
            f"Invalid level {db.levels[t.level]!r}: {r.algorithm} releases the blocks "
            f"({db.levels[last]!r}) only"
        )
    if r.algorithm == "gdpc":
        return gdpc(np.full(n, t.truth(db)), r.epsilon, g).astype(np.float64)
    if r.algorithm == "adpc":
        return adpc(np.full(n, t.truth(db)), r.epsilon, r.n_runs, g)
    if r.algorithm != "rdpc":
        raise InvalidParameterError(f"Invalid algorithm {r.algorithm!r}; allowed: gdpc, rdpc, adpc")
    tree = count_tree(db, t.query, t.cell)
    return np.array([rdpc(tree, r.epsilon, g).dp[t.level + 1][t.unit] for _ in range(n)])


def _stratified(
    r: Stratified, db: HistogramDatabase, t: Target, n: int, g: np.random.Generator
) -> FloatArray:
    last = len(db.levels) - 1
    if t.level != last or t.query not in (TOTAL, DETAILED):
        raise InvalidParameterError(
            f"Invalid target {db.levels[t.level]!r}/{t.query!r}: {r.kind} releases each block's "
            f"total and detailed cells ({db.levels[last]!r}, query 'total' or 'detailed')"
        )
    if r.kind == "sa3":
        e2 = r.epsilon if r.epsilon_strata is None else r.epsilon_strata
        rel = stratified_release(np.tile(db.histograms[t.unit], (n, 1)), r.epsilon, e2, g)
        out = rel.total if t.query == TOTAL else rel.strata[:, t.cell]
        return out.astype(np.float64)
    if r.kind != "sa4":
        raise InvalidParameterError(f"Invalid stratified release {r.kind!r}; allowed: sa3, sa4")
    if last == 0:
        raise InvalidParameterError("Invalid database for sa4: no level above the blocks")
    county = db.parents[-1]
    members = np.flatnonzero(county == county[t.unit])
    pos = int(np.searchsorted(members, t.unit))
    m = members.size
    x = np.tile(db.histograms[members], (n, 1))
    rel = invariant_release(x, np.repeat(np.arange(n, dtype=np.int64), m), r.epsilon, g)
    strata = rel.strata.reshape(n, m, -1)[:, pos, :]
    return (strata.sum(axis=1) if t.query == TOTAL else strata[:, t.cell]).astype(np.float64)


def released_values(
    release: Release,
    db: HistogramDatabase,
    n: int,
    rng: np.random.Generator,
    *,
    level: str | int,
    unit: int,
    query: str = TOTAL,
    cell: int = 0,
) -> FloatArray:
    """``n`` independent runs of ``release`` on ``db``: the released value of (level, unit, query
    cell) of each (float64; ADPC's values lie on ℤ/P, RDPC's are real). ``n`` is bounded by
    :data:`MAX_RELEASE_BYTES` (:func:`check_runs`)."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise InvalidParameterError(f"Invalid n: {n!r}; need an integer >= 1")
    g = check_rng(rng)
    t = Target.check(db, level, unit, query, cell)
    check_runs(int(n), release, db, t)
    if isinstance(release, Allocation):
        return np.asarray(_allocation(release, db, t, int(n), g), dtype=np.float64)
    if isinstance(release, TopDown):
        return np.asarray(_topdown(release, db, t, int(n), g), dtype=np.float64)
    if isinstance(release, Hierarchical):
        return np.asarray(_hierarchical(release, db, t, int(n), g), dtype=np.float64)
    if isinstance(release, Stratified):
        return np.asarray(_stratified(release, db, t, int(n), g), dtype=np.float64)
    raise InvalidParameterError(
        f"Invalid release {release!r}; give Allocation, TopDown, Hierarchical or Stratified"
    )


@dataclass(frozen=True)
class ReleaseSamples:
    """Released values of one (level, unit, query cell) in independent runs on D and on D′."""

    release: Release
    level: str
    unit: int
    query: str
    cell: int
    truth_d: int
    truth_d_prime: int
    dp_d: FloatArray
    dp_d_prime: FloatArray

    @property
    def errors(self) -> tuple[FloatArray, FloatArray]:
        """Both samples minus the same reference, the count of D (events on the output)."""
        return self.dp_d - self.truth_d, self.dp_d_prime - self.truth_d


def _check_size(name: str, v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
        raise InvalidParameterError(f"Invalid {name}: {v!r}; need an integer >= 1")
    if v > MAX_REPLICATES:
        raise InvalidParameterError(
            f"Invalid {name}: {v!r}; the largest allowed is {MAX_REPLICATES} (MAX_REPLICATES)"
        )
    return int(v)


def release_range(
    pair: HistogramPair,
    release: Release,
    *,
    level: str | int,
    unit: int,
    query: str = TOTAL,
    cell: int = 0,
    start: int,
    stop: int,
    replicates: int,
    seed: int,
    chunk: int = DEFAULT_CHUNK,
) -> tuple[FloatArray, FloatArray]:
    """Released values of replicates ``start..stop−1`` of :func:`release_samples` (same
    ``replicates``, ``seed`` and ``chunk``) on D and on D′: each stream chunk the range meets is
    drawn whole and cut, so ranges computed anywhere, in any split, join into one run's values."""
    replicates = _check_size("replicates", replicates)
    chunk = _check_size("chunk", chunk)
    if (
        isinstance(start, bool)
        or isinstance(stop, bool)
        or not 0 <= int(start) < int(stop) <= replicates
    ):
        raise InvalidParameterError(
            f"Invalid replicate range {start!r}..{stop!r}; need 0 <= start < stop <= {replicates}"
        )
    start, stop = int(start), int(stop)
    t = Target.check(pair.d, level, unit, query, cell)
    check_runs(min(chunk, replicates), release, pair.d, t, name="chunk")
    key = int(release.key)
    out = np.empty((2, stop - start), dtype=np.float64)
    for b, db in enumerate((pair.d, pair.d_prime)):
        for k in range(start // chunk, (stop - 1) // chunk + 1):
            lo, hi = k * chunk, min((k + 1) * chunk, replicates)
            g = seeds.rng(seed, DIRECT_RELEASE, key, b, k)
            values = released_values(
                release, db, hi - lo, g, level=t.level, unit=t.unit, query=t.query, cell=t.cell
            )
            a, z = max(lo, start), min(hi, stop)
            out[b, a - start : z - start] = values[a - lo : z - lo]
    return out[0], out[1]


def release_samples(
    pair: HistogramPair,
    release: Release,
    *,
    level: str | int,
    unit: int,
    query: str = TOTAL,
    cell: int = 0,
    replicates: int,
    seed: int,
    chunk: int = DEFAULT_CHUNK,
) -> ReleaseSamples:
    """Run ``release`` ``replicates`` times on D and on D′ (independent keyed streams, see the module
    docstring) and keep the released value of (``level``, ``unit``, ``query`` cell ``cell``).

    TopDown is run on the state holding ``unit`` only (each state is its own release)."""
    t = Target.check(pair.d, level, unit, query, cell)  # replicates, chunk: checked by the range
    dp_d, dp_p = release_range(
        pair,
        release,
        level=t.level,
        unit=t.unit,
        query=t.query,
        cell=t.cell,
        start=0,
        stop=replicates,
        replicates=replicates,
        seed=seed,
        chunk=chunk,
    )
    return ReleaseSamples(
        release,
        pair.d.levels[t.level],
        t.unit,
        t.query,
        t.cell,
        t.truth(pair.d),
        t.truth(pair.d_prime),
        dp_d,
        dp_p,
    )
