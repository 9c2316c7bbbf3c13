"""Flaxman's synthetic hierarchy (Flaxman 2019 §2.1): N people placed uniformly in a regular J-level tree.

Every areal unit above the bottom level has ``C = ⌊(N/μ)^{1/J}⌋`` children, so level ``j`` (0 = the
nation, J = the leaves) has ``C^j`` units and a leaf holds μ people on average. Person ``i``'s location
is a J-tuple ``(D_i1, …, D_iJ)`` with every ``D_ij ~ U{0, …, C−1}`` independently.

Representation: the tuple is stored as one mixed-radix integer, the *leaf code*
``D_i1·C^{J−1} + D_i2·C^{J−2} + … + D_iJ``. With this numbering the unit at level ``j`` containing a
leaf is ``leaf // C^{J−j}``, the parent of unit ``u`` is ``u // C`` and the children of a unit are
contiguous, so the exact total counts (TC) of every level are one ``np.bincount`` of the leaf codes
followed by sums of ``C`` consecutive entries.

A product of independent uniforms on ``{0, …, C−1}`` is the uniform law on ``{0, …, C^J−1}``, so the
leaf codes are drawn directly (one draw per person instead of J); :attr:`FlaxmanPopulation.locations`
decodes them back into the N×J matrix D of the paper.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from auditlib import seeds
from auditlib.exceptions import InvalidParameterError

#: keyed stream of the people's locations (see :mod:`auditlib.seeds`; ids >= 10 are module-local)
FLAXMAN_POPULATION = 10

#: Most people (N) and most leaves (C^J ≤ N/μ) of a generated population: the United States'
#: size, rounded up. A person's leaf code takes 8 bytes and a neighbour pair holds D and D′
#: (16 bytes a person, measured), so a pair at the bound takes 6.4 GB; every leaf has a count
#: (8 bytes, and residuals per replicate), hence the same bound on the leaves.
#: :func:`generate_population` refuses more before drawing anyone.
MAX_PEOPLE = 4 * 10**8

#: Largest N/μ (about the number of leaves) :func:`children_per_unit` takes.
MAX_LEAF_RATIO = 2**53  # float-exact: the integer root below takes a step or two


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InvalidParameterError(
            f"Invalid {name}: {value!r}; it must be an integer >= {minimum}"
        )
    if value < minimum:
        raise InvalidParameterError(
            f"Invalid {name}: {value!r}; it must be an integer >= {minimum}"
        )
    return int(value)


def children_per_unit(n_people: int, levels: int, mean_per_location: float) -> int:
    """``C = ⌊(N/μ)^{1/J}⌋``, computed exactly (no floating-point root at perfect powers)."""
    n = _check_int("N (n_people)", n_people, 1)
    j = _check_int("J (levels)", levels, 1)
    try:
        mu = Fraction(mean_per_location)
    except (TypeError, ValueError, OverflowError):
        raise InvalidParameterError(
            f"Invalid mu (mean_per_location): {mean_per_location!r}; it must be a finite number > 0"
        ) from None
    if mu <= 0:
        raise InvalidParameterError(
            f"Invalid mu (mean_per_location): {mean_per_location!r}; it must be > 0"
        )
    ratio = Fraction(n) / mu
    if ratio > MAX_LEAF_RATIO:  # N/μ leaves (about): far beyond any population, and the root below
        raise InvalidParameterError(  # would step through astronomically many candidates
            f"Invalid mu (mean_per_location): {mean_per_location!r}; N/mu = {float(ratio):.3g} "
            f"locations is past {MAX_LEAF_RATIO:.3g}; use a mean of at least "
            f"{n / MAX_LEAF_RATIO:.3g} people per location"
        )
    c = int(float(ratio) ** (1.0 / j))
    while c > 0 and Fraction(c) ** j > ratio:
        c -= 1
    while Fraction(c + 1) ** j <= ratio:
        c += 1
    if c < 1:
        raise InvalidParameterError(
            f"Invalid N={n}, mu={mean_per_location!r}: (N/mu)^(1/J) < 1 gives no areal units; "
            "need N >= mu"
        )
    return c


@dataclass(frozen=True)
class FlaxmanHierarchy:
    """A regular tree: ``levels`` (J) levels below the nation, ``children`` (C) children per unit."""

    levels: int
    children: int

    def __post_init__(self) -> None:
        _check_int("J (levels)", self.levels, 1)
        _check_int("C (children)", self.children, 1)
        if self.children**self.levels > 2**62:
            raise InvalidParameterError(
                f"Invalid hierarchy: C^J = {self.children}^{self.levels} leaves overflow int64"
            )

    @classmethod
    def from_population(
        cls, n_people: int, levels: int, mean_per_location: float
    ) -> FlaxmanHierarchy:
        """Flaxman's tree for N people, J levels and μ people per location on average."""
        return cls(levels, children_per_unit(n_people, levels, mean_per_location))

    def n_units(self, level: int) -> int:
        """``C^level`` units at ``level`` (0 = the nation, J = the leaves)."""
        self._check_level(level)
        return int(self.children**level)

    @property
    def n_leaves(self) -> int:
        return self.n_units(self.levels)

    def parent(self, level: int) -> npt.NDArray[np.int64]:
        """Parent index (at ``level − 1``) of every unit of ``level`` ≥ 1: ``u // C``."""
        self._check_level(level)
        if level == 0:
            raise InvalidParameterError("Invalid level: 0; the nation has no parent")
        return np.arange(self.n_units(level), dtype=np.int64) // self.children

    def unit_of_leaf(self, leaf: npt.ArrayLike, level: int) -> npt.NDArray[np.int64]:
        """The unit at ``level`` containing each leaf code."""
        self._check_level(level)
        return np.asarray(leaf, dtype=np.int64) // self.children ** (self.levels - level)

    def _check_level(self, level: int) -> None:
        if not 0 <= level <= self.levels:
            raise InvalidParameterError(f"Invalid level: {level!r}; allowed 0..{self.levels}")


@dataclass(frozen=True)
class FlaxmanPopulation:
    """The database D: one leaf code per person (row), in a :class:`FlaxmanHierarchy`."""

    hierarchy: FlaxmanHierarchy
    leaf: npt.NDArray[np.int64]  # (n_people,) mixed-radix location codes

    def __post_init__(self) -> None:
        leaf = np.asarray(self.leaf)
        if leaf.ndim != 1 or not np.issubdtype(leaf.dtype, np.integer):
            raise InvalidParameterError(
                f"Invalid leaf codes: need a 1-D integer array, got {leaf.dtype} {leaf.shape}"
            )
        if leaf.size and (leaf.min() < 0 or leaf.max() >= self.hierarchy.n_leaves):
            raise InvalidParameterError(
                f"Invalid leaf codes: outside 0..{self.hierarchy.n_leaves - 1} "
                f"(min {leaf.min()}, max {leaf.max()})"
            )

    @property
    def n_people(self) -> int:
        return int(self.leaf.size)

    @property
    def locations(self) -> npt.NDArray[np.int64]:
        """The paper's N×J matrix D: column j is the location at level j + 1, in ``0..C−1``."""
        h = self.hierarchy
        powers = h.children ** np.arange(h.levels - 1, -1, -1, dtype=np.int64)
        return (self.leaf[:, None] // powers[None, :]) % h.children

    def leaf_counts(self) -> npt.NDArray[np.int64]:
        """TC of every leaf (zero-population leaves included)."""
        return np.bincount(self.leaf, minlength=self.hierarchy.n_leaves).astype(np.int64)

    def total_counts(self) -> list[npt.NDArray[np.int64]]:
        """TC of every level 0..J (index = level): exact sums of consecutive children."""
        h = self.hierarchy
        out = [self.leaf_counts()]
        for _ in range(h.levels):
            out.append(out[-1].reshape(-1, h.children).sum(axis=1))
        return out[::-1]


def people_from_locations(
    hierarchy: FlaxmanHierarchy, locations: npt.ArrayLike
) -> FlaxmanPopulation:
    """A population from the paper's N×J matrix D (each entry in ``0..C−1``)."""
    d = np.asarray(locations)
    h = hierarchy
    if d.ndim != 2 or d.shape[1] != h.levels or not np.issubdtype(d.dtype, np.integer):
        raise InvalidParameterError(
            f"Invalid locations: need an integer (N, {h.levels}) array, got {d.dtype} {d.shape}"
        )
    if d.size and (d.min() < 0 or d.max() >= h.children):
        raise InvalidParameterError(f"Invalid locations: entries must lie in 0..{h.children - 1}")
    leaf = np.zeros(d.shape[0], dtype=np.int64)
    for j in range(h.levels):  # J columns, not N rows
        leaf = leaf * h.children + d[:, j]
    return FlaxmanPopulation(h, leaf)


def check_population_size(n_people: int, levels: int, mean_per_location: float) -> FlaxmanHierarchy:
    """The hierarchy of a population of ``n_people`` if both N and its number of leaves are at most
    :data:`MAX_PEOPLE`; else raise naming the value and the bound. Nothing is allocated."""
    n = _check_int("N (n_people)", n_people, 1)
    if n > MAX_PEOPLE:
        raise InvalidParameterError(
            f"Invalid N (n_people): {n_people!r}; the largest allowed is {MAX_PEOPLE} "
            "(MAX_PEOPLE: 8 bytes a person, 16 for D and D′)"
        )
    h = FlaxmanHierarchy.from_population(n, levels, mean_per_location)
    if h.n_leaves > MAX_PEOPLE:
        raise InvalidParameterError(
            f"Invalid mu (mean_per_location): {mean_per_location!r}; N/mu gives {h.n_leaves} "
            f"leaves, more than the {MAX_PEOPLE} allowed (MAX_PEOPLE: every leaf has a count); "
            "raise mu"
        )
    return h


def generate_population(
    n_people: int,
    levels: int,
    mean_per_location: float,
    *,
    rng: np.random.Generator | None = None,
    seed: int | None = None,
) -> FlaxmanPopulation:
    """Flaxman's database: N people, each uniform over the ``C^J`` leaves of the regular tree.

    Pass either an explicit ``rng`` or a ``seed`` (then the keyed stream ``FLAXMAN_POPULATION`` is used).
    """
    h = check_population_size(n_people, levels, mean_per_location)
    if (rng is None) == (seed is None):
        raise InvalidParameterError("Pass exactly one of rng= or seed=")
    g = rng if rng is not None else seeds.rng(int(seed), FLAXMAN_POPULATION)  # type: ignore[arg-type]
    if not isinstance(g, np.random.Generator):
        raise InvalidParameterError(f"Invalid rng: {type(g).__name__}; need a numpy Generator")
    leaf = g.integers(0, h.n_leaves, size=int(n_people), dtype=np.int64)
    return FlaxmanPopulation(h, leaf)
