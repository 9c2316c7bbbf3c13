"""Census releases under test: one released count of a database D vs a neighbour D′ (Askin, Kutta & Dette on 2020).

The mechanism under test is the simulation module's release of *one* count — a block (leaf) or a
tract (any level) of a :class:`~auditlib.geography.flaxman.FlaxmanPopulation` — run ``n`` times on
the same database:

* ``"allocation"`` — the noisy measurement of TopDown: count + N_Z(0, σ²) with σ² of one query at
  one geolevel of a Bureau allocation (:mod:`auditlib.allocations`), drawn by
  :func:`auditlib.simulate.release.simulate_block`; with ``postprocess="nonnegative"`` the released
  count is clipped at 0 (post-processing: the loss can only shrink).
* ``"gdpc"`` — Flaxman's GDPC leaf count, count + G(ε) (:func:`auditlib.simulate.hierarchical.gdpc`).

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

The releases of block-histogram databases (TopDown, Flaxman's ADPC and RDPC counts) are in
:mod:`auditlib.mpl.census_hist`; they reuse :data:`PAIR_KINDS` and the exact-law entry built here.
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
from auditlib.mechanisms import DiscreteGaussian, TwoSidedGeometric
from auditlib.mechanisms.base import positive_finite
from auditlib.mpl.catalogue import KnownMechanism, _known_mechanism
from auditlib.mpl.dpl import Region
from auditlib.simulate.hierarchical import gdpc
from auditlib.simulate.neighbours import add_person, move_person, remove_person
from auditlib.simulate.release import QueryPlan, simulate_block

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

    return _known_mechanism(
        name,
        sampler,
        "discrete",
        pairs,
        region,
        claimed,
        epsilon,
        loss,
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
    """Flaxman's GDPC block (leaf) count, count + G(ε), under D vs D′: ε*_C = ε exactly."""
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
