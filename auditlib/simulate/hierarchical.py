"""Flaxman's three ε-DP counting algorithms on a hierarchy: GDPC, RDPC and ADPC (§2.2).

All three add two-sided geometric noise G(z), ``P(k) ∝ e^{−z|k|}``
(:class:`auditlib.mechanisms.TwoSidedGeometric`), to exact total counts (TC):

* **GDPC** — the leaves only: ``GDPC = TC + G(ε)``.
* **RDPC** — every level ``0..J`` is measured with ``G(ε/(J+1))``; the root is ``RDPC_{} = N + X``
  and, top-down, each unit's children are *raked* (scaled by one common factor) so that they sum to the
  parent's raked count: ``RDPC_child = NoisyC_child · RDPC_parent / Σ_siblings NoisyC``.
* **ADPC** — the mean of P independent GDPC runs, each at ``ε/P``.

Raking when the noisy sum of a family is **zero or negative** (the formula's ratio is then undefined or
flips every sign): the parent's raked count is split *equally* among its children. The children still
sum to the parent exactly; such families are counted in :attr:`HierarchicalRelease.n_equal_splits`
(with Flaxman's sizes they essentially never happen: a family's noisy sum is ≈ C·μ ≫ its noise). A
positive but small noisy sum is raked by the formula, however large the factor.

Everything is vectorized over units: a level's family sums are one ``np.bincount`` of the children's
noisy counts by parent index, so the same code rakes Flaxman's regular tree and an irregular spine (any
tree given as per-level parent-index arrays).

Residuals (DP − TC, zero-population units included) of many independent replicates come from
:func:`simulate_residuals`; replicate ``r`` uses the keyed stream ``(HIERARCHICAL_NOISE, algorithm,
r)``, so any range of replicates can be computed separately (one chunk per worker) and gives the same
numbers as one run over all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from auditlib import seeds
from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.geography.flaxman import FlaxmanPopulation
from auditlib.geography.spine import LEVELS as SPINE_LEVELS
from auditlib.geography.spine import Spine
from auditlib.mechanisms import TwoSidedGeometric
from auditlib.mechanisms.base import check_rng, positive_finite
from auditlib.simulate.release import ResidualBlock, check_block_size

#: keyed stream of the noise of one replicate: (HIERARCHICAL_NOISE, algorithm key, replicate)
HIERARCHICAL_NOISE = 11

Algorithm = Literal["gdpc", "rdpc", "adpc"]
ALGORITHMS: tuple[Algorithm, ...] = ("gdpc", "rdpc", "adpc")
ALGORITHM_KEYS: dict[str, int] = {"gdpc": 0, "rdpc": 1, "adpc": 2}

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class CountTree:
    """Exact counts of a hierarchy: ``counts[j]`` per unit of level j (0 = one root unit) and
    ``parents[j − 1]`` the index (at level j − 1) of the parent of every unit of level j ≥ 1;
    ``names[j]`` names level j (default ``"L0"``, ``"L1"``, …, as Flaxman 2019 numbers them)."""

    counts: tuple[IntArray, ...]
    parents: tuple[IntArray, ...]
    names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        counts = tuple(np.asarray(c, dtype=np.int64) for c in self.counts)
        parents = tuple(np.asarray(p, dtype=np.int64) for p in self.parents)
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "parents", parents)
        names = tuple(self.names) or tuple(f"L{j}" for j in range(len(counts)))
        if len(names) != len(counts) or len(set(names)) != len(names):
            raise InvalidParameterError(
                f"Invalid names {names!r}: need one distinct name per level ({len(counts)})"
            )
        object.__setattr__(self, "names", names)
        if len(counts) < 1 or counts[0].shape != (1,):
            raise InvalidParameterError("Invalid counts: level 0 must hold exactly one (root) unit")
        if len(parents) != len(counts) - 1:
            raise InvalidParameterError(
                f"Invalid parents: need one array per level below the root ({len(counts) - 1}), "
                f"got {len(parents)}"
            )
        for j, (c, p) in enumerate(zip(counts[1:], parents, strict=True), start=1):
            n_up = counts[j - 1].size
            if c.ndim != 1 or p.shape != c.shape:
                raise InvalidParameterError(
                    f"Invalid level {j}: counts {c.shape} and parents {p.shape} must be equal 1-D"
                )
            if p.size and (p.min() < 0 or p.max() >= n_up):
                raise InvalidParameterError(f"Invalid parents of level {j}: outside 0..{n_up - 1}")
            if np.bincount(p, minlength=n_up).min(initial=1) < 1:
                raise InvalidParameterError(f"Invalid parents of level {j}: a unit has no child")
        for j, c in enumerate(counts):
            if (c < 0).any():
                raise InvalidParameterError(f"Invalid counts at level {j}: negative entries")

    @classmethod
    def from_population(cls, population: FlaxmanPopulation) -> CountTree:
        """TC of every level of Flaxman's database and the regular tree's parents (``u // C``)."""
        h = population.hierarchy
        return cls(
            tuple(population.total_counts()),
            tuple(h.parent(j) for j in range(1, h.levels + 1)),
        )

    @classmethod
    def from_spine(cls, spine: Spine) -> CountTree:
        """The nation (root, the sum of the spine's states), State, County, Tract, Block_Group and
        Block populations of a spine, with its parent indices."""
        pops = spine.populations()
        counts = [pops["State"].sum(keepdims=True), *(pops[g] for g in SPINE_LEVELS)]
        parents = [np.zeros(spine.n_states, dtype=np.int64)]
        parents += [spine.parents[g].astype(np.int64) for g in SPINE_LEVELS[1:]]
        return cls(tuple(counts), tuple(parents), ("US", *SPINE_LEVELS))

    @property
    def levels(self) -> int:
        """J: the number of levels below the root."""
        return len(self.counts) - 1

    @property
    def leaf_counts(self) -> IntArray:
        return self.counts[-1]

    def level_index(self, level: int | str) -> int:
        """The index of a level given by name or index."""
        if isinstance(level, str):
            if level not in self.names:
                raise UnknownNameError(
                    f"Unknown level: {level!r}; the tree has {', '.join(self.names)}"
                )
            return self.names.index(level)
        if isinstance(level, bool) or not isinstance(level, int | np.integer):
            raise InvalidParameterError(f"Invalid level: {level!r}; a name or an index")
        if not 0 <= level <= self.levels:
            raise InvalidParameterError(f"Invalid level: {level}; allowed 0..{self.levels}")
        return int(level)


@dataclass(frozen=True)
class HierarchicalRelease:
    """One run of an algorithm: the released levels and, per released level, DP − TC."""

    algorithm: Algorithm
    epsilon: float
    dp: dict[int, npt.NDArray[np.float64] | IntArray]  # level -> DP counts
    truth: dict[int, IntArray]  # level -> TC
    n_equal_splits: dict[int, int]  # RDPC: level -> families raked by equal split

    def residual(self, level: int) -> FloatArray:
        """DP − TC of every unit of a released level (zero-population units included)."""
        if level not in self.dp:
            raise InvalidParameterError(
                f"Invalid level: {level}; {self.algorithm} releases levels {sorted(self.dp)}"
            )
        return np.asarray(self.dp[level], dtype=np.float64) - self.truth[level]


def _epsilon(epsilon: float) -> float:
    return positive_finite("epsilon", epsilon)


def _n_runs(n_runs: int | None) -> int:
    if n_runs is None:
        raise InvalidParameterError(
            "Missing P (n_runs) of ADPC: it averages P runs at ε/P; pass n_runs (Flaxman 2019: 4)"
        )
    if isinstance(n_runs, bool) or not isinstance(n_runs, int | np.integer) or n_runs < 1:
        raise InvalidParameterError(f"Invalid P (n_runs): {n_runs!r}; it must be an integer >= 1")
    return int(n_runs)


def gdpc(leaf_counts: npt.ArrayLike, epsilon: float, rng: np.random.Generator) -> IntArray:
    """GDPC: ``TC + G(ε)`` for every leaf (int64)."""
    tc = np.asarray(leaf_counts, dtype=np.int64)
    return tc + TwoSidedGeometric(_epsilon(epsilon)).rvs(tc.shape, check_rng(rng))


def adpc(
    leaf_counts: npt.ArrayLike, epsilon: float, n_runs: int | None, rng: np.random.Generator
) -> FloatArray:
    """ADPC: mean of ``P`` independent GDPC runs at ``ε/P`` (values on the lattice ``ℤ/P``)."""
    tc = np.asarray(leaf_counts, dtype=np.int64)
    eps = _epsilon(epsilon)
    p = _n_runs(n_runs)
    mech = TwoSidedGeometric(eps / p)
    g = check_rng(rng)
    total = np.zeros(tc.shape, dtype=np.int64)
    for _ in range(p):  # P runs, each vectorized over the leaves
        total += mech.rvs(tc.shape, g)
    return tc + total / p


def rake(
    noisy_children: npt.ArrayLike,
    parent: npt.ArrayLike,
    parent_values: npt.ArrayLike,
) -> tuple[FloatArray, int]:
    """Scale each family of children so that it sums to its parent's value.

    ``parent[i]`` is the index in ``parent_values`` of child i's parent. A family whose noisy sum is
    ≤ 0 gets the parent's value split equally. Returns the raked children and the number of such
    families.
    """
    x = np.asarray(noisy_children, dtype=np.float64)
    par = np.asarray(parent, dtype=np.int64)
    target = np.asarray(parent_values, dtype=np.float64)
    n_up = target.size
    sums = np.bincount(par, weights=x, minlength=n_up)
    sizes = np.bincount(par, minlength=n_up)
    if (sizes == 0).any():
        raise InvalidParameterError("Invalid parent index: a parent has no child")
    bad = sums <= 0
    safe = np.where(bad, 1.0, sums)
    factor = target / safe
    out = x * factor[par]
    if bad.any():
        eq = bad[par]
        out[eq] = (target / sizes)[par[eq]]
    return out, int(bad.sum())


def rdpc(tree: CountTree, epsilon: float, rng: np.random.Generator) -> HierarchicalRelease:
    """RDPC: every level measured with ``G(ε/(J+1))``, then raked top-down (levels 0..J released)."""
    eps = _epsilon(epsilon)
    g = check_rng(rng)
    mech = TwoSidedGeometric(eps / (tree.levels + 1))
    root = tree.counts[0] + mech.rvs(1, g)
    dp: dict[int, npt.NDArray[np.float64] | IntArray] = {0: root.astype(np.float64)}
    splits: dict[int, int] = {}
    up = dp[0]
    for j in range(1, tree.levels + 1):
        tc = tree.counts[j]
        noisy = tc + mech.rvs(tc.shape, g)
        up, splits[j] = rake(noisy, tree.parents[j - 1], up)
        dp[j] = up
    return HierarchicalRelease(
        "rdpc", eps, dp, {j: tree.counts[j] for j in range(tree.levels + 1)}, splits
    )


def release(
    tree: CountTree,
    algorithm: Algorithm,
    epsilon: float,
    rng: np.random.Generator,
    *,
    n_runs: int | None = None,
) -> HierarchicalRelease:
    """One run of ``algorithm`` ("gdpc", "rdpc" or "adpc") on ``tree``; ADPC needs ``n_runs`` = P
    (the other two ignore it)."""
    if algorithm == "rdpc":
        return rdpc(tree, epsilon, rng)
    leaves = tree.levels
    if algorithm == "gdpc":
        dp: npt.NDArray[np.float64] | IntArray = gdpc(tree.leaf_counts, epsilon, rng)
    elif algorithm == "adpc":
        dp = adpc(tree.leaf_counts, epsilon, n_runs, rng)
    else:
        raise InvalidParameterError(
            f"Invalid algorithm: {algorithm!r}; allowed: {', '.join(ALGORITHMS)}"
        )
    return HierarchicalRelease(
        algorithm, _epsilon(epsilon), {leaves: dp}, {leaves: tree.leaf_counts}, {}
    )


def released_levels(tree: CountTree, algorithm: Algorithm) -> tuple[int, ...]:
    """Levels an algorithm releases: all of 0..J for RDPC, the leaves J otherwise."""
    if algorithm not in ALGORITHMS:
        raise InvalidParameterError(
            f"Invalid algorithm: {algorithm!r}; allowed: {', '.join(ALGORITHMS)}"
        )
    return tuple(range(tree.levels + 1)) if algorithm == "rdpc" else (tree.levels,)


def replicate_rng(seed: int, algorithm: Algorithm, replicate: int) -> np.random.Generator:
    """The keyed generator of one replicate's noise."""
    if algorithm not in ALGORITHM_KEYS:
        raise InvalidParameterError(
            f"Invalid algorithm: {algorithm!r}; allowed: {', '.join(ALGORITHMS)}"
        )
    return seeds.rng(seed, HIERARCHICAL_NOISE, ALGORITHM_KEYS[algorithm], replicate)


def simulate_residuals(
    tree: CountTree | FlaxmanPopulation,
    algorithm: Algorithm,
    epsilon: float,
    *,
    seed: int,
    replicates: int | Sequence[int] = 1,
    n_runs: int | None = None,
    dtype: type[np.floating] = np.float32,
) -> dict[str, npt.NDArray[np.floating]]:
    """Residuals DP − TC of independent replicates: level name (``tree.names``; Flaxman's
    population: ``"L0"``…``"LJ"``) -> array (replicates, units), for the levels the algorithm
    releases (RDPC: all; GDPC, ADPC: the leaves). ADPC needs ``n_runs`` = P.

    ``replicates`` is a count (replicates ``0..R−1``) or the replicate indices of one chunk (e.g.
    ``range(100, 200)``); rows follow that order, and each row depends only on (seed, algorithm,
    replicate index). Arrays are C-contiguous, replicate-major, ready to be written row-block by
    row-block. ``float32`` holds GDPC residuals exactly up to 2^24, ADPC's on ℤ/P up to 2^24/P.
    """
    t = CountTree.from_population(tree) if isinstance(tree, FlaxmanPopulation) else tree
    eps = _epsilon(epsilon)
    if isinstance(replicates, int | np.integer) and not isinstance(replicates, bool):
        if replicates < 1:
            raise InvalidParameterError(f"Invalid replicates: {replicates}; need >= 1")
        reps: Sequence[int] = range(int(replicates))
    else:
        reps = [int(r) for r in replicates]  # type: ignore[union-attr]
        if not reps or min(reps) < 0:
            raise InvalidParameterError(f"Invalid replicates: {replicates!r}; need indices >= 0")
    levels = released_levels(t, algorithm)
    items = sum(t.counts[j].size for j in levels)
    check_block_size(len(reps), items, np.dtype(dtype).itemsize)
    if algorithm == "adpc":
        _n_runs(n_runs)
    out = {j: np.empty((len(reps), t.counts[j].size), dtype=dtype) for j in levels}
    for row, r in enumerate(reps):
        rel = release(t, algorithm, eps, replicate_rng(seed, algorithm, r), n_runs=n_runs)
        for j in levels:
            out[j][row] = rel.residual(j)
    return {t.names[j]: a for j, a in out.items()}


def residual_block(
    tree: CountTree | FlaxmanPopulation,
    algorithm: Algorithm,
    epsilon: float,
    *,
    level: int | str,
    seed: int,
    replicates: int | Sequence[int] = 1,
    n_runs: int | None = None,
    query_id: int = 0,
) -> ResidualBlock:
    """One released level's (by index or name) residuals as a
    :class:`~auditlib.simulate.release.ResidualBlock` (the layout the result store writes): one
    query (``query_id``, the total count), one cell, one item per unit. ADPC needs ``n_runs``."""
    t = CountTree.from_population(tree) if isinstance(tree, FlaxmanPopulation) else tree
    level = t.level_index(level)
    if level not in released_levels(t, algorithm):
        raise InvalidParameterError(
            f"Invalid level: {level}; {algorithm} releases {released_levels(t, algorithm)}"
        )
    res = simulate_residuals(
        t, algorithm, epsilon, seed=seed, replicates=replicates, n_runs=n_runs
    )[t.names[level]]
    truth = t.counts[level]
    if truth.size and truth.max() > np.iinfo(np.int32).max:
        raise InvalidParameterError(f"Invalid level {level}: counts exceed int32")
    n = truth.size
    return ResidualBlock(
        residual=res.astype(np.float32, copy=False),
        truth=truth.astype(np.int32),
        query_index=np.full(n, query_id, dtype=np.int16),
        unit_index=np.arange(n, dtype=np.int32),
        cell_index=np.zeros(n, dtype=np.int32),
    )
