"""Census releases under test: one released count of a database D vs a neighbour D′ (seed 002 on 2020).

The mechanism under test is the simulation module's release of *one* count — a block (leaf) or a
tract (any level) of a :class:`~auditlib.geography.flaxman.FlaxmanPopulation` — run ``n`` times on
the same database:

* ``"allocation"`` — the noisy measurement of TopDown: count + N_Z(0, σ²) with σ² of one query at
  one geolevel of a Bureau allocation (:mod:`auditlib.allocations`), drawn by
  :func:`auditlib.simulate.release.simulate_block`; with ``postprocess="nonnegative"`` the released
  count is clipped at 0 (post-processing: the loss can only shrink).
* ``"gdpc"`` — seed 001's GDPC leaf count, count + G(ε) (:func:`auditlib.simulate.hierarchical.gdpc`).

The inputs are databases: D and its neighbours from :mod:`auditlib.simulate.neighbours` — one person
added to the unit, removed from it, or moved into it from another unit — so the sampler computes the
unit's true count from the database itself (``TC(D)`` then ``TC(D′)``), exactly as a release would.

Exact loss. The count under test moves by ±1 between D and D′, so ℓ_{D,D′}(t) is the log-ratio of
two shifted output laws, computed exactly over C by enumeration (:class:`KnownMechanism`):

* discrete Gaussian, count c vs c + s (s = ±1): ℓ(t) = |s(2(t − c) − s)| / (2σ²) — affine in t,
  unbounded over ℤ (the DG is not pure DP), finite on a bounded C: ε*_C = (2r + 1)/(2σ²) on
  C = {c − r, …, c + r};
* clipped at 0: the atom P(0) = P(Z ≤ −c) replaces the left tail, so ε*_C ≤ the unclipped value;
* GDPC: ℓ(t) = ε on every integer t (pure ε-DP, attained everywhere).

C is the integers within ``radius`` (default ⌈``radius_sd``·σ⌉ for the DG) of the count of D,
intersected with the release's support (t ≥ 0 when clipped).

Releases of block-histogram databases (:mod:`auditlib.simulate.neighbours_hist`), sampled through
:func:`auditlib.simulate.direct.released_values`:

* :func:`topdown_count` — a block (or any level's) count of the TopDown-style release of one state,
  D′ = a person moved into the unit from another block. No closed form: an
  :class:`AccountedMechanism` whose bound is the certified ε(δ) of the discrete Gaussian measurements
  the move shifts (post-processing cannot increase loss), turned into a pointwise bound on the
  loss at outputs of probability ≥ p_min (:meth:`AccountedMechanism.pointwise_bound`).
* :func:`adpc_count` — seed 001's ADPC block count, exact law by convolution (a
  :class:`KnownMechanism`; ε*_C < ε on a bounded C).
* :func:`rdpc_count` — seed 001's RDPC count of any level, rounded; bounded by ε (composition of
  the levels), no exact law.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from auditlib.allocations import load_allocation
from auditlib.exceptions import InvalidParameterError
from auditlib.geography.flaxman import FlaxmanHierarchy, FlaxmanPopulation
from auditlib.geography.schema import schema as schema_by_name
from auditlib.mechanisms import DiscreteGaussian, TwoSidedGeometric
from auditlib.mechanisms.base import positive_finite
from auditlib.mpl.catalogue import KnownMechanism
from auditlib.mpl.dpl import Region
from auditlib.mpl.protocol import MechanismUnderTest
from auditlib.simulate.direct import Hierarchical, Release, Target, TopDown, released_values
from auditlib.simulate.hierarchical import gdpc
from auditlib.simulate.neighbours import add_person, move_person, remove_person
from auditlib.simulate.neighbours_hist import (
    HistogramDatabase,
    HistogramPair,
    accounting_components,
    neighbour,
)
from auditlib.simulate.neighbours_hist import move_person as move_in_histogram
from auditlib.simulate.release import QueryPlan, simulate_block
from auditlib.simulate.topdown import StateHierarchy

CensusRelease = Literal["allocation", "gdpc"]
PairKind = Literal["add", "remove", "move"]
PAIR_KINDS: tuple[PairKind, ...] = ("add", "remove", "move")
DEFAULT_RADIUS_SD = 2.0


def unit_count(db: FlaxmanPopulation, level: int, unit: int) -> int:
    """TC of ``unit`` at ``level`` of the database ``db``."""
    h = db.hierarchy
    if not 0 <= level <= h.levels:
        raise InvalidParameterError(f"Invalid level: {level!r}; allowed 0..{h.levels}")
    if not 0 <= unit < h.n_units(level):
        raise InvalidParameterError(
            f"Invalid unit: {unit!r}; level {level} has units 0..{h.n_units(level) - 1}"
        )
    leaves = h.unit_of_leaf(db.leaf, level)
    return int(np.count_nonzero(leaves == unit))


@dataclass(frozen=True)
class CensusCountSampler:
    """The released count of ``unit`` at ``level``, run ``n`` times on one database.

    ``release="allocation"``: count + N_Z(0, ``sigma2``) through the simulation module (clipped at 0
    with ``postprocess="nonnegative"``); ``release="gdpc"``: count + G(``epsilon``) (leaves only).
    """

    release: CensusRelease
    level: int
    unit: int
    sigma2: float = math.nan
    epsilon: float = math.nan
    postprocess: Literal["none", "nonnegative"] = "none"

    def __call__(self, db: Any, n: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        if not isinstance(db, FlaxmanPopulation):
            raise InvalidParameterError(
                f"Invalid input: {type(db).__name__}; a census release runs on a database "
                "(FlaxmanPopulation)."
            )
        c = unit_count(db, self.level, self.unit)
        if self.release == "gdpc":
            return gdpc(np.full(n, c, dtype=np.int64), self.epsilon, rng)
        # n independent releases of the cell: n geounits with the same truth in one simulated block
        truth = np.full((n, 1), c, dtype=np.int64)
        block = simulate_block(
            [truth], [QueryPlan("cell", 1, 1, self.sigma2)], [0], [rng], self.postprocess
        )
        return (block.truth.astype(np.int64) + block.residual[0].astype(np.int64)).astype(np.int64)


def census_database(count: int, *, levels: int = 2, children: int = 4) -> FlaxmanPopulation:
    """A small database whose leaf 0 (a block; unit 0 at every level) holds ``count`` people and every
    other leaf one person, so that a person can be removed from or moved into leaf 0."""
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
        raise InvalidParameterError(f"Invalid count: {count!r}; a count is an integer >= 0.")
    h = FlaxmanHierarchy(levels, children)
    leaf = np.concatenate(
        [np.zeros(int(count), dtype=np.int64), np.arange(1, h.n_leaves, dtype=np.int64)]
    )
    return FlaxmanPopulation(h, leaf)


def neighbour_pairs(
    db: FlaxmanPopulation, level: int, unit: int, kinds: Sequence[str] = PAIR_KINDS
) -> tuple[tuple[FlaxmanPopulation, FlaxmanPopulation], ...]:
    """(D, D′) for each kind: one person added to ``unit``, removed from it, moved into it."""
    h = db.hierarchy
    units = h.unit_of_leaf(db.leaf, level)
    inside = np.flatnonzero(units == unit)
    outside = np.flatnonzero(units != unit)
    first_leaf = int(unit) * h.children ** (h.levels - level)  # a leaf of the unit
    out = []
    for k in kinds:
        if k == "add":
            p = add_person(db, first_leaf)
        elif k == "remove":
            if inside.size == 0:
                raise InvalidParameterError(
                    f"Invalid pair 'remove': unit {unit} at level {level} is empty in D."
                )
            p = remove_person(db, int(inside[0]))
        elif k == "move":
            if outside.size == 0:
                raise InvalidParameterError(
                    f"Invalid pair 'move': nobody lives outside unit {unit} at level {level}."
                )
            p = move_person(db, int(outside[0]), first_leaf)
        else:
            raise InvalidParameterError(
                f"Invalid pair kind: {k!r}; allowed: {', '.join(PAIR_KINDS)}"
            )
        out.append((p.d, p.d_prime))
    return tuple(out)


def _radius(radius: int | None, sigma2: float, radius_sd: float) -> int:
    if radius is None:
        return max(1, math.ceil(positive_finite("radius_sd", radius_sd) * math.sqrt(sigma2)))
    if isinstance(radius, bool) or not isinstance(radius, (int, np.integer)) or radius < 1:
        raise InvalidParameterError(f"Invalid radius: {radius!r}; an integer >= 1.")
    return int(radius)


def _entry(
    name: str,
    sampler: Any,
    logpmf_of: Any,
    pairs: tuple[tuple[Any, Any], ...],
    radius: int,
    clipped: bool,
    claimed: float,
    epsilon: float,
    count: Callable[[Any], int] | None = None,
    scale: int = 1,
) -> KnownMechanism:
    """An entry with exact losses: ``logpmf_of(t, c)`` is the output law for a count ``c`` of the
    database (``count(db)``, default the sampler's unit count); outputs are ``scale``·value."""
    unit_of = count or (lambda db: unit_count(db, sampler.level, sampler.unit))
    c0 = unit_of(pairs[0][0])
    lo = max(c0 - radius, 0) if clipped else c0 - radius
    region = Region.integers((scale * lo, scale * (c0 + radius)))
    counts: dict[int, int] = {}

    def count_of(db: Any) -> int:
        key = id(db)
        if key not in counts:
            counts[key] = unit_of(db)
        return counts[key]

    def loss(a: Any, b: Any, t: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
        tt = np.asarray(t, dtype=np.int64)
        return np.asarray(np.abs(logpmf_of(tt, count_of(a)) - logpmf_of(tt, count_of(b))))

    eps_pairs = np.array([float(np.max(loss(a, b, region.points))) for a, b in pairs])
    return KnownMechanism(
        mechanism=MechanismUnderTest(name, sampler, "discrete"),
        pairs=pairs,
        region=region,
        claimed_epsilon=claimed,
        epsilon=epsilon,
        epsilon_c_pairs=eps_pairs,
        loss=loss,
        log_pmf=lambda db, t: logpmf_of(np.asarray(t, dtype=np.int64), count_of(db)),
    )


def allocation_count(
    sigma2: float,
    *,
    db: FlaxmanPopulation | None = None,
    count: int = 3,
    level: int | None = None,
    unit: int = 0,
    pairs: Sequence[str] = PAIR_KINDS,
    radius: int | None = None,
    radius_sd: float = DEFAULT_RADIUS_SD,
    postprocess: Literal["none", "nonnegative"] = "none",
    name: str = "allocation_count",
) -> KnownMechanism:
    """A discrete-Gaussian measurement (σ²) of one count under D vs D′, with its exact ε*_C.

    ``db`` defaults to :func:`census_database` (``count`` people in block 0); ``level`` defaults to
    the leaves (a block count). Not pure DP (``epsilon`` = ∞); ε*_C is finite on the bounded C.
    """
    s2 = positive_finite("sigma2", sigma2)
    if postprocess not in ("none", "nonnegative"):
        raise InvalidParameterError(
            f"Invalid postprocess: {postprocess!r}; allowed: none, nonnegative"
        )
    d = census_database(count) if db is None else db
    lev = d.hierarchy.levels if level is None else int(level)
    sampler = CensusCountSampler("allocation", lev, int(unit), sigma2=s2, postprocess=postprocess)
    unit_count(d, lev, int(unit))  # checks level and unit
    dg = DiscreteGaussian(s2)
    clipped = postprocess == "nonnegative"

    def logpmf_of(t: npt.NDArray[np.int64], c: int) -> npt.NDArray[np.float64]:
        out = np.asarray(dg.logpmf(t - c), dtype=np.float64)
        if clipped:
            atom = math.log(float(dg.cdf(np.array([-c]))[0]))
            out = np.where(t == 0, atom, np.where(t < 0, -np.inf, out))
        return out

    r = _radius(radius, s2, radius_sd)
    return _entry(
        name,
        sampler,
        logpmf_of,
        neighbour_pairs(d, lev, int(unit), pairs),
        r,
        clipped,
        math.inf,
        math.inf,
    )


def allocation_query_count(
    allocation: str,
    geolevel: str,
    query: str | None = None,
    *,
    neighbours: str = "add_remove",
    universe: str = "persons",
    region: str = "US",
    **kwargs: Any,
) -> KnownMechanism:
    """:func:`allocation_count` with σ² of ``query`` at ``geolevel`` of a shipped allocation
    (default: the geolevel's least noisy query, the largest ρ_q)."""
    qs = load_allocation(allocation).select(universe, region, geolevel)
    if query is None:
        qb = max(qs, key=lambda q: q.rho)
    else:
        found = [q for q in qs if q.query == query]
        if not found:
            raise InvalidParameterError(
                f"Invalid query: {query!r} at {geolevel}; allowed: {', '.join(q.query for q in qs)}"
            )
        qb = found[0]
    s2 = float(qb.sigma2(neighbours))
    return allocation_count(s2, name=f"{allocation}:{geolevel}:{qb.query}", **kwargs)


def gdpc_count(
    epsilon: float,
    *,
    db: FlaxmanPopulation | None = None,
    count: int = 3,
    unit: int = 0,
    pairs: Sequence[str] = PAIR_KINDS,
    radius: int = 5,
) -> KnownMechanism:
    """Seed 001's GDPC block (leaf) count, count + G(ε), under D vs D′: ε*_C = ε exactly."""
    eps = positive_finite("epsilon", epsilon)
    d = census_database(count) if db is None else db
    lev = d.hierarchy.levels
    sampler = CensusCountSampler("gdpc", lev, int(unit), epsilon=eps)
    unit_count(d, lev, int(unit))
    geo = TwoSidedGeometric(eps)

    def logpmf_of(t: npt.NDArray[np.int64], c: int) -> npt.NDArray[np.float64]:
        return np.asarray(geo.logpmf(t - c), dtype=np.float64)

    r = _radius(radius, 1.0, DEFAULT_RADIUS_SD)
    return _entry(
        "gdpc_count",
        sampler,
        logpmf_of,
        neighbour_pairs(d, lev, int(unit), pairs),
        r,
        False,
        eps,
        eps,
    )


# -- releases of block-histogram databases: TopDown, seed 001's ADPC and RDPC -------------------

#: δ grid over which :meth:`AccountedMechanism.pointwise_bound` takes the best bound
POINTWISE_DELTAS = np.geomspace(1e-14, 1e-1, 27)


@dataclass(frozen=True)
class ReleaseCountSampler:
    """The released value of (``level``, ``unit``, ``query`` cell ``cell``) of a histogram database
    under ``release`` (:func:`auditlib.simulate.direct.released_values`), times ``scale`` and rounded
    to an integer: ADPC's values on ℤ/P with ``scale`` = P exactly, RDPC's real values rounded to
    the nearest count (post-processing: the loss can only shrink)."""

    release: Release
    level: str | int
    unit: int
    query: str = "total"
    cell: int = 0
    scale: int = 1

    def __call__(self, db: Any, n: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        if not isinstance(db, HistogramDatabase):
            raise InvalidParameterError(
                f"Invalid input: {type(db).__name__}; this census release runs on a "
                "HistogramDatabase."
            )
        v = released_values(
            self.release,
            db,
            n,
            rng,
            level=self.level,
            unit=self.unit,
            query=self.query,
            cell=self.cell,
        )
        return np.rint(v * self.scale).astype(np.int64)


@dataclass(frozen=True, eq=False)
class AccountedMechanism:
    """A census release under test whose loss is *bounded*, not known: no exact ε*_C.

    ``epsilon_of_delta(δ)`` is a certified upper bound on ε(δ) of what is composed into the released
    value, over all ``pairs`` (for a pure ε-DP release: ε for every δ). A pointwise loss follows:
    (ε, δ)-DP gives P_D(t) ≤ e^ε P_D′(t) + δ for the event {t}, hence for every output t with
    P_D(t), P_D′(t) ≥ p_min

        ℓ(t) ≤ ε(δ) + log(1 + δ / p_min)          (both directions: the relation is symmetric),

    and so ε*_C ≤ :meth:`pointwise_bound` on any C where both laws are ≥ p_min. MPL's lower bound
    must not exceed it (a cross-check of release and accounting, not a coverage experiment).
    """

    mechanism: MechanismUnderTest
    pairs: tuple[tuple[Any, Any], ...]
    region: Region
    epsilon_of_delta: Callable[[float], float]
    components: tuple[tuple[tuple[float, int], ...], ...]  # per pair: (σ², count) composed
    note: str

    def pointwise_bound(self, p_min: float) -> float:
        """min over δ (0 and :data:`POINTWISE_DELTAS`) of ε(δ) + log(1 + δ/p_min): the largest |ℓ(t)| at outputs of probability
        ≥ ``p_min`` under both databases."""
        p = positive_finite("p_min", p_min)
        return float(
            min(
                self.epsilon_of_delta(float(d)) + math.log1p(d / p)
                for d in (0.0, *POINTWISE_DELTAS)
            )
        )


def histogram_database(
    counts: Sequence[int] = (3, 1, 2, 4), fanouts: Sequence[int] = (2, 2)
) -> HistogramDatabase:
    """A small one-state database of total counts: levels State, County, Block, ``fanouts``
    children per unit, ``counts`` people in the blocks."""
    levels = ("State", "County", "Block")[: len(fanouts) + 1]
    h = StateHierarchy.from_fanouts(levels, fanouts)
    hist = np.asarray(counts, dtype=np.int64)[:, None]
    return HistogramDatabase(schema_by_name("total"), levels, h.parents, hist, 1)


def _hist_pairs(
    db: HistogramDatabase, unit: int, cell: int, kinds: Sequence[str]
) -> tuple[HistogramPair, ...]:
    """One person added to block ``unit`` (cell ``cell``), removed from it, or moved into it from
    the last other non-empty block."""
    others = [b for b in range(db.n_blocks) if b != unit and db.histograms[b, cell] > 0]
    out = []
    for k in kinds:
        if k == "move":
            if not others:
                raise InvalidParameterError(
                    f"Invalid pair 'move': no other block has people in cell {cell}."
                )
            out.append(neighbour(db, "move", block=unit, cell=cell, other_block=others[-1]))
        else:
            out.append(neighbour(db, k, block=unit, cell=cell))
    return tuple(out)


def topdown_count(
    measured: Sequence[Sequence[tuple[str, float]]] | None = None,
    *,
    db: HistogramDatabase | None = None,
    level: str | int = -1,
    unit: int = 0,
    query: str = "total",
    cell: int = 0,
    sources: Sequence[int] | None = None,
    radius: int = 3,
    tol: float = 1e-3,
) -> AccountedMechanism:
    """The released count of a TopDown-style release (``measured``: per level of ``db``, top first,
    its (query, σ²)) under D vs D′ = one person of block ``b`` moved into the chosen unit's block,
    for every ``b`` in ``sources`` (default: every other non-empty block of the state).

    No closed form: ``epsilon_of_delta`` is the certified ε(δ) of the discrete Gaussian
    measurements the move shifts by ±1 (:func:`~auditlib.simulate.neighbours_hist.
    accounting_components`, :class:`~auditlib.accounting.DiscreteGaussianComposition`), the worst
    pair's; post-processing cannot exceed it. Only moves inside the state are offered: the state
    total is invariant (released exactly), so adding or removing a person is not covered by the
    measurements' accounting. ``db`` defaults to :func:`histogram_database`; ``level`` -1 means the
    blocks; C is the chosen count ± ``radius`` (t ≥ 0)."""
    from auditlib.accounting import DiscreteGaussianComposition

    d = histogram_database() if db is None else db
    if d.n_top != 1:
        raise InvalidParameterError(
            f"Invalid db: {d.n_top} top units; TopDown runs one state (HistogramDatabase.state)"
        )
    if measured is None:
        measured = [[("total", 1.0)], [("total", 2.0)], [("total", 4.0)]][: len(d.levels)]
    release = TopDown.of(measured, tol)
    lev = d.level_index(len(d.levels) - 1 if level == -1 else level)
    target = Target.check(d, lev, unit, query, cell)
    blocks = np.flatnonzero(d.unit_of_block(np.arange(d.n_blocks), lev) == target.unit)
    into = int(blocks[0])
    full = d.schema.cell_query_index(target.query)
    dcell = int(np.flatnonzero(full == target.cell)[0])
    if sources is None:
        sources = [
            b
            for b in range(d.n_blocks)
            if d.histograms[b, dcell] > 0 and int(d.unit_of_block(b, lev)) != target.unit
        ]
    if not sources:
        raise InvalidParameterError("Invalid sources: no block outside the unit has anyone to move")
    pairs = [move_in_histogram(d, int(b), dcell, into, dcell) for b in sources]
    comps = tuple(tuple(accounting_components(p, release.measured)) for p in pairs)
    accountants = [DiscreteGaussianComposition(list(c)) for c in comps]

    def eps_of_delta(delta: float) -> float:
        if delta <= 0:
            return math.inf  # discrete Gaussians are not pure DP
        return max(float(np.max(a.epsilon(delta).upper)) for a in accountants)

    c0 = target.truth(d)
    sampler = ReleaseCountSampler(release, lev, target.unit, target.query, target.cell)
    return AccountedMechanism(
        mechanism=MechanismUnderTest("topdown_count", sampler, "discrete"),
        pairs=tuple((p.d, p.d_prime) for p in pairs),
        region=Region.integers((max(c0 - radius, 0), c0 + radius)),
        epsilon_of_delta=eps_of_delta,
        components=comps,
        note="no exact loss: bounded by the composed measurements' certified eps(delta)",
    )


def _geometric_sum_logpmf(eps: float, p: int) -> tuple[npt.NDArray[np.float64], int]:
    """log pmf of the sum of ``p`` independent G(ε/p) on −p·M..p·M (by convolution) and its offset
    p·M; each G is cut at |k| ≤ M with the mass beyond below 1e-30 (dropped)."""
    z = eps / p
    m = math.ceil((69.1 + max(0.0, -math.log1p(-math.exp(-z)))) / z)  # α^M/(1−α) < 1e-30
    k = np.arange(-m, m + 1)
    one = np.asarray(TwoSidedGeometric(z).pmf(k), dtype=np.float64)
    out = one
    for _ in range(p - 1):
        out = np.convolve(out, one)
    with np.errstate(divide="ignore"):
        return np.log(out), p * m


def adpc_count(
    epsilon: float,
    *,
    n_runs: int = 4,
    db: HistogramDatabase | None = None,
    unit: int = 0,
    pairs: Sequence[str] = PAIR_KINDS,
    radius: int = 3,
) -> KnownMechanism:
    """Seed 001's ADPC block count (the mean of P = ``n_runs`` GDPC runs at ε/P) under D vs D′.

    Exact law: released = c + S/P with S the sum of P independent G(ε/P), whose pmf is computed by
    convolution (mass dropped < 1e-30 per term); outputs are encoded as P·released (integers).
    A person changes c by ±1, i.e. S by ±P: ℓ(t) = |ln p_S(t − Pc) − ln p_S(t − Pc′)|, at most ε
    (composition of P runs at ε/P) and approaching ε only far in the tails, so ε*_C < ε on a
    bounded C. ``db`` defaults to :func:`histogram_database`; C = P·(c ± ``radius``)."""
    eps = positive_finite("epsilon", epsilon)
    if isinstance(n_runs, bool) or not isinstance(n_runs, int) or n_runs < 1:
        raise InvalidParameterError(f"Invalid n_runs: {n_runs!r}; an integer >= 1")
    d = histogram_database() if db is None else db
    lev = len(d.levels) - 1
    t = Target.check(d, lev, unit, "total", 0)
    sampler = ReleaseCountSampler(Hierarchical("adpc", eps, n_runs), lev, t.unit, scale=n_runs)
    logp, off = _geometric_sum_logpmf(eps, n_runs)

    def logpmf_of(tt: npt.NDArray[np.int64], c: int) -> npt.NDArray[np.float64]:
        s = np.asarray(tt, dtype=np.int64) - n_runs * c + off
        ok = (s >= 0) & (s < logp.size)
        return np.where(ok, logp[np.clip(s, 0, logp.size - 1)], -np.inf)

    hp = _hist_pairs(d, t.unit, 0, pairs)
    return _entry(
        f"adpc_count_p{n_runs}",
        sampler,
        logpmf_of,
        tuple((p.d, p.d_prime) for p in hp),
        radius,
        False,
        eps,
        eps,
        count=lambda db: t.truth(db),
        scale=n_runs,
    )


def rdpc_count(
    epsilon: float,
    *,
    db: HistogramDatabase | None = None,
    level: str | int = -1,
    unit: int = 0,
    pairs: Sequence[str] = PAIR_KINDS,
    radius: int = 3,
) -> AccountedMechanism:
    """Seed 001's RDPC count of one unit (raked top-down), rounded to an integer, under D vs D′.

    No exact law (raking divides by a noisy family sum): the loss is bounded by the composition of
    the levels, J + 1 measurements at ε/(J + 1) of which a person changes one count each — ε-DP,
    so ``epsilon_of_delta`` is ε for every δ (an upper bound, not attained in general).
    ``db`` defaults to :func:`histogram_database`; C = the count ± ``radius`` (t ≥ 0 not assumed)."""
    eps = positive_finite("epsilon", epsilon)
    d = histogram_database() if db is None else db
    lev = d.level_index(len(d.levels) - 1 if level == -1 else level)
    t = Target.check(d, lev, unit, "total", 0)
    block = int(np.flatnonzero(d.unit_of_block(np.arange(d.n_blocks), lev) == t.unit)[0])
    hp = _hist_pairs(d, block, 0, pairs)
    c0 = t.truth(d)
    sampler = ReleaseCountSampler(Hierarchical("rdpc", eps), lev, t.unit)
    return AccountedMechanism(
        mechanism=MechanismUnderTest("rdpc_count", sampler, "discrete"),
        pairs=tuple((p.d, p.d_prime) for p in hp),
        region=Region.integers((c0 - radius, c0 + radius)),
        epsilon_of_delta=lambda _delta: eps,
        components=(),
        note="no exact loss: bounded by the composition of the J + 1 levels at eps/(J + 1)",
    )
