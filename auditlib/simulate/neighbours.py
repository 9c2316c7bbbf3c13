"""Neighbouring databases of Flaxman's person-level database, for the *direct* privacy-loss estimate.

``D′`` differs from ``D`` in one person: moved to another leaf (bounded DP, "replace one row"; seed
001 moves someone from area 0 to area 1001), added, or removed (unbounded DP). The hierarchy (``C``,
``J``) stays that of ``D`` even when the number of people changes by one.

The direct estimate runs an algorithm many times on ``D`` and on ``D′`` independently and compares the
frequencies of one event *on the output*, e.g. ``{DP count of unit u − TC_u(D) = k}``: both samples
must be measured against the same reference (here ``TC(D)``), otherwise the event differs between
the two databases. :func:`direct_samples` returns the released counts of one unit under ``D`` and
``D′``; replicate ``r`` of database ``b`` (0 = D, 1 = D′) uses the keyed stream
``(NEIGHBOUR_NOISE, algorithm, b, r)``.

Block-histogram populations (synthetic, spine, tables; TopDown, SA3/SA4 and Flaxman's releases of a
table) have their own neighbours in :mod:`auditlib.simulate.neighbours_hist` and direct samples of
any release in :mod:`auditlib.simulate.direct`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from auditlib import seeds
from auditlib.exceptions import InvalidParameterError
from auditlib.geography.flaxman import FlaxmanPopulation
from auditlib.simulate.hierarchical import (
    ALGORITHM_KEYS,
    Algorithm,
    CountTree,
    release,
    released_levels,
)

#: keyed stream of the direct estimate's runs: (NEIGHBOUR_NOISE, algorithm, database, replicate)
NEIGHBOUR_NOISE = 12

ChangeKind = Literal["move", "add", "remove"]


@dataclass(frozen=True)
class Change:
    """How D′ differs from D: person ``person`` of D moved ``from_leaf`` → ``to_leaf``; or a person
    added at ``to_leaf`` (``person`` = their row in D′, the last); or person ``person`` removed."""

    kind: ChangeKind
    person: int
    from_leaf: int | None
    to_leaf: int | None


@dataclass(frozen=True)
class NeighbourPair:
    """Two databases that differ in one person, and the change."""

    d: FlaxmanPopulation
    d_prime: FlaxmanPopulation
    change: Change

    def count_difference(self, level: int) -> dict[int, int]:
        """``TC(D′) − TC(D)`` at ``level``, as {unit: ±1} (empty if the move stays in one unit)."""
        h = self.d.hierarchy
        diff: dict[int, int] = {}
        if self.change.from_leaf is not None:
            u = int(h.unit_of_leaf(self.change.from_leaf, level))
            diff[u] = diff.get(u, 0) - 1
        if self.change.to_leaf is not None:
            u = int(h.unit_of_leaf(self.change.to_leaf, level))
            diff[u] = diff.get(u, 0) + 1
        return {u: d for u, d in diff.items() if d}

    def trees(self) -> tuple[CountTree, CountTree]:
        """Exact counts of D and D′."""
        return CountTree.from_population(self.d), CountTree.from_population(self.d_prime)


def _check_person(pop: FlaxmanPopulation, person: int) -> int:
    if not 0 <= int(person) < pop.n_people:
        raise InvalidParameterError(
            f"Invalid person: {person!r}; allowed 0..{pop.n_people - 1} ({pop.n_people} people)"
        )
    return int(person)


def _check_leaf(pop: FlaxmanPopulation, leaf: int) -> int:
    n = pop.hierarchy.n_leaves
    if not 0 <= int(leaf) < n:
        raise InvalidParameterError(f"Invalid leaf: {leaf!r}; allowed 0..{n - 1}")
    return int(leaf)


def move_person(pop: FlaxmanPopulation, person: int, to_leaf: int) -> NeighbourPair:
    """D′: person ``person`` lives in leaf ``to_leaf`` instead (must be a different leaf)."""
    i = _check_person(pop, person)
    to = _check_leaf(pop, to_leaf)
    frm = int(pop.leaf[i])
    if frm == to:
        raise InvalidParameterError(f"Invalid move: person {i} already lives in leaf {to}")
    leaf = pop.leaf.copy()
    leaf[i] = to
    return NeighbourPair(pop, FlaxmanPopulation(pop.hierarchy, leaf), Change("move", i, frm, to))


def move_between_areas(
    pop: FlaxmanPopulation, from_leaf: int = 0, to_leaf: int = 1001
) -> NeighbourPair:
    """Flaxman's D′: the first person living in leaf ``from_leaf`` moved to leaf ``to_leaf``."""
    frm = _check_leaf(pop, from_leaf)
    _check_leaf(pop, to_leaf)
    idx = np.flatnonzero(pop.leaf == frm)
    if idx.size == 0:
        raise InvalidParameterError(f"Invalid from_leaf: {from_leaf}; nobody lives there")
    return move_person(pop, int(idx[0]), to_leaf)


def add_person(pop: FlaxmanPopulation, leaf: int) -> NeighbourPair:
    """D′: D plus one person living in ``leaf`` (appended as the last row)."""
    to = _check_leaf(pop, leaf)
    new = np.append(pop.leaf, np.int64(to))
    return NeighbourPair(
        pop, FlaxmanPopulation(pop.hierarchy, new), Change("add", pop.n_people, None, to)
    )


def remove_person(pop: FlaxmanPopulation, person: int) -> NeighbourPair:
    """D′: D without person ``person``."""
    i = _check_person(pop, person)
    new = np.delete(pop.leaf, i)
    return NeighbourPair(
        pop, FlaxmanPopulation(pop.hierarchy, new), Change("remove", i, int(pop.leaf[i]), None)
    )


@dataclass(frozen=True)
class DirectSamples:
    """Released counts of one unit in independent runs on D and on D′, and ``TC_unit(D)``."""

    level: int
    unit: int
    truth_d: int
    dp_d: npt.NDArray[np.float64]
    dp_d_prime: npt.NDArray[np.float64]

    @property
    def errors(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Both samples minus the same reference ``TC_unit(D)`` (events on the output)."""
        return self.dp_d - self.truth_d, self.dp_d_prime - self.truth_d


def direct_samples(
    pair: NeighbourPair,
    algorithm: Algorithm,
    epsilon: float,
    *,
    level: int,
    unit: int,
    replicates: int,
    seed: int,
    n_runs: int | None = None,
) -> DirectSamples:
    """Run ``algorithm`` ``replicates`` times on D and on D′ and keep unit ``unit`` of ``level``
    (ADPC needs ``n_runs`` = P)."""
    t_d, t_p = pair.trees()
    if level not in released_levels(t_d, algorithm):
        raise InvalidParameterError(
            f"Invalid level: {level}; {algorithm} releases {released_levels(t_d, algorithm)}"
        )
    if not 0 <= unit < t_d.counts[level].size:
        raise InvalidParameterError(
            f"Invalid unit: {unit}; level {level} has {t_d.counts[level].size} units"
        )
    if replicates < 1:
        raise InvalidParameterError(f"Invalid replicates: {replicates}; need >= 1")
    key = ALGORITHM_KEYS[algorithm]
    out = np.empty((2, replicates), dtype=np.float64)
    for b, tree in enumerate((t_d, t_p)):
        for r in range(replicates):
            g = seeds.rng(seed, NEIGHBOUR_NOISE, key, b, r)
            out[b, r] = release(tree, algorithm, epsilon, g, n_runs=n_runs).dp[level][unit]
    return DirectSamples(level, unit, int(t_d.counts[level][unit]), out[0], out[1])
