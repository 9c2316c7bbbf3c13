"""A synthetic but realistically sized US geographic spine: State → County → Tract → Block group → Block.

The national totals are the real 2020 tallies (shipped in ``data/geography_2020.csv``): 50 states + DC
with 3,143 counties, 84,414 tracts, 239,780 block groups and 8,132,968 blocks; Puerto Rico (optional,
its own state-equivalent and its own TopDown run) with 78, 981, 2,555 and 41,987. Which state holds how
many units, and how many people live in each block, is drawn — reproducibly, from keyed streams — by the
model below. It is a stand-in with the right sizes and plausible skew, not the real geography.

Model (every step vectorized over units; ``Gamma(k)`` has mean 1 and shape ``k``):

1. **State sizes** ``π ∝ exp(N(0, s²))`` over the region's states (``state_log_sd`` s = 1.0: the 2020
   state populations have a log-sd of about 1, from Wyoming's 0.58 M to California's 39.5 M around a
   median of about 4.5 M; with 51 draws the extremes land near 0.1× and 10× the median).
2. **Counties per state** ``= 1 + Multinomial(T_county − S, w)`` with ``w ∝ π^a · Gamma(k)``: county
   counts follow population only loosely (Texas has 254 counties, California 58, Delaware 3).
3. **Within a state**, county sizes are the state's size split by normalized log-normal shares
   (``county_log_sd`` 1.5: counties range from a few hundred people to millions); tract sizes split each county with ``Gamma(k_tract)`` (large
   shape: tracts are drawn to similar populations), block-group sizes each tract with ``Gamma(k_bg)``.
4. **Children per parent** at every level below: ``1 + Multinomial(T_level − n_parents, w)`` with ``w``
   the parents' sizes (tracts and block groups follow population), so every parent has ≥ 1 child and the
   level's total is exact. Blocks per block group follow area more than population: ``w ∝ size^b ·
   Gamma(k)``. The weights being random (log-normal or Gamma), each allocation is a mixed multinomial —
   a Dirichlet–multinomial when the weights are Gamma — over-dispersed like real unit counts.
5. **Block populations**: a block is empty with probability ``empty_block_share`` (water, parks,
   industrial land, medians; default 0.3 — an assumption, not a measured 2020 share); a non-empty block
   gets a ``Gamma(k_block)`` share (shape 0.5: heavy right tail) of its block group's size; the block's
   population is ``Poisson(P · weight)`` with weights normalized to 1 over the region, so the expected
   total is the region's 2020 resident population ``P`` (331,449,281; Puerto Rico 3,285,874) and the
   realized total differs from it by about ``√P`` (an independent-Poisson population is a multinomial
   one with a Poisson total). Small Poisson means add sampling zeros to the structural ones.

Layout: units of each level are numbered so that the children of a unit are contiguous and in parent
order; ``parents[level]`` gives each unit's parent index at the level above (int32). No Python loop runs
over units.

The DHC's Prim and Tract_Subset_Group levels between County and Tract (:data:`PRIM_LEVELS`) are drawn
afterwards from their own keyed stream ``(SPINE_PRIMS, region)`` (:mod:`auditlib.geography.spine_prims`),
so the levels above are the same draws with or without them; ``prim_parents`` holds their links and
:meth:`Spine.parents_over` the parents over any chain of levels.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from importlib.resources import files
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from auditlib import seeds
from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.geography.spine_prims import prim_parents as draw_prim_parents

#: keyed streams: (SPINE_UNITS, region) for the unit counts, (SPINE_POPULATION, region) for people,
#: (SPINE_PRIMS, region) for the Prims (drawn last: the other draws do not depend on them)
SPINE_UNITS = 13
SPINE_POPULATION = 14
SPINE_PRIMS = 35

LEVELS = ("State", "County", "Tract", "Block_Group", "Block")
#: the DHC's spine: Prim and Tract_Subset_Group between County and the tracts (its Tract_Subsets)
PRIM_LEVELS = ("State", "County", "Prim", "Tract_Subset_Group", "Tract", "Block_Group", "Block")
REGIONS = ("US", "PR")
_REGION_KEYS = {"US": 0, "PR": 1}
_CSV_ROWS = {
    "states_and_equivalents": "states",
    "counties_and_equivalents": "counties",
    "census_tracts": "tracts",
    "block_groups": "block_groups",
    "census_blocks": "blocks",
}
#: 2020 Census resident populations (April 1, 2020): 50 states + DC, and Puerto Rico
POPULATION_2020 = {"US": 331_449_281, "PR": 3_285_874}

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class SpineTotals:
    """Units per level of one region (each level ≥ the level above: every parent has a child)."""

    states: int
    counties: int
    tracts: int
    block_groups: int
    blocks: int

    def __post_init__(self) -> None:
        vals = self.as_tuple()
        if vals[0] < 1:
            raise InvalidParameterError(f"Invalid states: {self.states}; need >= 1")
        for (a, x), (b, y) in zip(
            zip(LEVELS, vals, strict=True), zip(LEVELS[1:], vals[1:], strict=True), strict=False
        ):
            if y < x:
                raise InvalidParameterError(
                    f"Invalid totals: {b} = {y} < {a} = {x}; every parent needs >= 1 child"
                )

    def as_tuple(self) -> tuple[int, int, int, int, int]:
        return (self.states, self.counties, self.tracts, self.block_groups, self.blocks)

    def scaled(self, factor: float) -> SpineTotals:
        """A smaller spine for tests: every level below State × ``factor`` (kept ≥ the level above)."""
        if not 0 < factor <= 1:
            raise InvalidParameterError(f"Invalid factor: {factor}; need 0 < factor <= 1")
        out = [self.states]
        for x in self.as_tuple()[1:]:
            out.append(max(out[-1], round(x * factor)))
        return SpineTotals(*out)


def tallies_2020() -> dict[str, SpineTotals]:
    """The 2020 National Geographic Tallies of the shipped CSV: {"US": 50 states + DC, "PR": …}."""
    text = (files("auditlib") / "data" / "geography_2020.csv").read_text(encoding="utf-8")
    rows = {r["entity"]: r for r in csv.DictReader(text.splitlines())}
    out = {}
    for region, column in (("US", "us_50_states_plus_dc"), ("PR", "puerto_rico")):
        vals = {attr: int(rows[entity][column]) for entity, attr in _CSV_ROWS.items()}
        out[region] = SpineTotals(**vals)
    return out


@dataclass(frozen=True)
class SpineModel:
    """Parameters of the allocation and population model (see the module docstring)."""

    state_log_sd: float = 1.0
    county_count_exponent: float = 0.5
    county_count_shape: float = 2.0
    county_log_sd: float = 1.5
    tract_size_shape: float = 8.0
    block_group_size_shape: float = 4.0
    block_count_exponent: float = 0.5
    block_count_shape: float = 1.0
    block_size_shape: float = 0.5
    empty_block_share: float = 0.3

    def __post_init__(self) -> None:
        for name, value in self.__dict__.items():
            if name == "empty_block_share":
                if not 0 <= value < 1:
                    raise InvalidParameterError(f"Invalid {name}: {value!r}; need 0 <= value < 1")
            elif name.endswith(("exponent", "log_sd")):
                if not (np.isfinite(value) and value >= 0):
                    raise InvalidParameterError(f"Invalid {name}: {value!r}; need finite >= 0")
            elif not (np.isfinite(value) and value > 0):
                raise InvalidParameterError(f"Invalid {name}: {value!r}; need finite > 0")


@dataclass(frozen=True)
class Spine:
    """Flat arrays of a spine. ``parents[level]`` (levels below State): parent index, int32, sorted.
    ``prim_parents`` (empty if not drawn): the links of :data:`PRIM_LEVELS` that differ, each sorted
    — ``"Prim"``: the county of each Prim, ``"Tract_Subset_Group"``: the Prim of each group,
    ``"Tract"``: the group of each tract."""

    state_names: tuple[str, ...]
    parents: dict[str, npt.NDArray[np.int32]]
    block_population: npt.NDArray[np.int32]
    prim_parents: dict[str, npt.NDArray[np.int32]] = field(default_factory=dict)

    @property
    def n_states(self) -> int:
        return len(self.state_names)

    def n_units(self, level: str) -> int:
        if level == "State":
            return self.n_states
        if level in ("Prim", "Tract_Subset_Group"):
            return int(self._link(level).size)
        return int(self._parents(level).size)

    def _parents(self, level: str) -> npt.NDArray[np.int32]:
        if level not in self.parents:
            raise UnknownNameError(
                f"Unknown geolevel: {level!r}; allowed: {', '.join(PRIM_LEVELS)}"
            )
        return self.parents[level]

    def _link(self, level: str, prims: bool = True) -> npt.NDArray[np.int32]:
        """Parent of every unit of ``level`` at the level above it in :data:`PRIM_LEVELS`
        (``prims``) or :data:`LEVELS`."""
        if level in ("Prim", "Tract_Subset_Group") or (prims and level == "Tract"):
            if level not in self.prim_parents:
                raise UnknownNameError(
                    f"Unknown geolevel: this spine has no {level!r} level drawn; "
                    "generate_spine draws the Prims"
                )
            return self.prim_parents[level]
        return self._parents(level)

    def parents_over(self, levels: Sequence[str]) -> list[npt.NDArray[np.int32]]:
        """The parent (at ``levels[i]``) of every unit of ``levels[i + 1]``, over a chain of levels in
        :data:`PRIM_LEVELS` order (e.g. ``LEVELS``, ``PRIM_LEVELS``, or State, County, Prim, Tract,
        Block): sorted, composed through the levels skipped. Without Prim or Tract_Subset_Group in
        ``levels`` these are ``parents`` (tracts under counties), as they were drawn."""
        prims = bool(set(levels) & {"Prim", "Tract_Subset_Group"})
        chain = PRIM_LEVELS if prims else LEVELS
        pos = [chain.index(g) if g in chain else -1 for g in levels]
        if min(pos, default=0) < 0 or pos != sorted(set(pos)):
            raise UnknownNameError(
                f"Invalid geolevels {tuple(levels)}: need distinct levels of "
                f"{', '.join(PRIM_LEVELS)}, in that order"
            )
        out = []
        for up, lo in pairwise(pos):
            idx = self._link(chain[lo], prims)
            for k in range(lo - 1, up, -1):
                idx = self._link(chain[k], prims)[idx]
            out.append(idx)
        return out

    def state_of(self, level: str) -> IntArray:
        """State index (0-based) of every unit of ``level``."""
        if level == "State":
            return np.arange(self.n_states, dtype=np.int64)
        if level in ("Prim", "Tract_Subset_Group"):
            return self.parents_over(("State", level))[0].astype(np.int64)
        i = LEVELS.index(level) if level in LEVELS else -1
        if i < 1:
            raise UnknownNameError(
                f"Unknown geolevel: {level!r}; allowed: {', '.join(PRIM_LEVELS)}"
            )
        idx = self._parents(level).astype(np.int64)
        for up in reversed(LEVELS[1:i]):
            idx = self.parents[up][idx].astype(np.int64)
        return idx

    def units_per_state(self, level: str) -> IntArray:
        """How many units of ``level`` each state holds."""
        return np.bincount(self.state_of(level), minlength=self.n_states).astype(np.int64)

    def children_per_unit(self, level: str) -> IntArray:
        """Children (at the level below) of every unit of ``level`` (not Block)."""
        i = LEVELS.index(level) if level in LEVELS else -1
        if not 0 <= i < len(LEVELS) - 1:
            raise UnknownNameError(f"Invalid geolevel: {level!r}; need a level above Block")
        return np.bincount(self.parents[LEVELS[i + 1]], minlength=self.n_units(level)).astype(
            np.int64
        )

    def populations(self) -> dict[str, IntArray]:
        """Population of every unit of every level (exact sums of the blocks), State first."""
        out: dict[str, IntArray] = {"Block": self.block_population.astype(np.int64)}
        for lo, up in zip(LEVELS[:0:-1], LEVELS[-2::-1], strict=True):
            out[up] = np.bincount(
                self.parents[lo], weights=out[lo], minlength=self.n_units(up)
            ).astype(np.int64)
        return {g: out[g] for g in LEVELS}

    @property
    def nbytes(self) -> int:
        links = sum(p.nbytes for p in self.prim_parents.values())
        return int(
            sum(p.nbytes for p in self.parents.values()) + self.block_population.nbytes + links
        )


def _gamma(rng: np.random.Generator, shape: float, n: int) -> npt.NDArray[np.float64]:
    """Positive Gamma(shape, 1/shape) draws (mean 1), floored at the smallest normal double."""
    return np.maximum(rng.gamma(shape, 1.0 / shape, size=n), np.finfo(np.float64).tiny)


def _split(
    rng: np.random.Generator, parent: IntArray, parent_size: npt.NDArray[np.float64], shape: float
) -> npt.NDArray[np.float64]:
    """Each parent's size split among its children by normalized Gamma(shape) shares."""
    g = _gamma(rng, shape, parent.size)
    tot = np.bincount(parent, weights=g, minlength=parent_size.size)
    return parent_size[parent] * g / tot[parent]


def _split_lognormal(
    rng: np.random.Generator, parent: IntArray, parent_size: npt.NDArray[np.float64], log_sd: float
) -> npt.NDArray[np.float64]:
    """Each parent's size split among its children by normalized log-normal(0, log_sd) shares."""
    g = np.exp(rng.normal(0.0, log_sd, size=parent.size))
    tot = np.bincount(parent, weights=g, minlength=parent_size.size)
    return parent_size[parent] * g / tot[parent]


def _allocate(
    rng: np.random.Generator, total: int, weights: npt.NDArray[np.float64]
) -> tuple[IntArray, IntArray]:
    """Children per parent, ``1 + Multinomial(total − n, weights)``, and the children's parents."""
    n = weights.size
    p = weights / weights.sum()
    counts = 1 + rng.multinomial(total - n, p).astype(np.int64)
    return counts, np.repeat(np.arange(n, dtype=np.int64), counts)


def _region(
    totals: SpineTotals, model: SpineModel, population: int, seed: int, region_key: int
) -> tuple[dict[str, IntArray], npt.NDArray[np.int32]]:
    g = seeds.rng(seed, SPINE_UNITS, region_key)
    s = totals.states
    pi = np.exp(g.normal(0.0, model.state_log_sd, size=s))
    pi /= pi.sum()
    w = pi**model.county_count_exponent * _gamma(g, model.county_count_shape, s)
    _, county_parent = _allocate(g, totals.counties, w)
    county_size = _split_lognormal(g, county_parent, pi, model.county_log_sd)
    _, tract_parent = _allocate(g, totals.tracts, county_size)
    tract_size = _split(g, tract_parent, county_size, model.tract_size_shape)
    _, bg_parent = _allocate(g, totals.block_groups, tract_size)
    bg_size = _split(g, bg_parent, tract_size, model.block_group_size_shape)
    w = bg_size**model.block_count_exponent * _gamma(g, model.block_count_shape, bg_size.size)
    _, block_parent = _allocate(g, totals.blocks, w)

    h = seeds.rng(seed, SPINE_POPULATION, region_key)
    n_blocks = block_parent.size
    weight = _gamma(h, model.block_size_shape, n_blocks)
    weight[h.random(n_blocks) < model.empty_block_share] = 0.0
    tot = np.bincount(block_parent, weights=weight, minlength=bg_size.size)
    share = np.divide(weight, tot[block_parent], out=np.zeros(n_blocks), where=weight > 0)
    weight = bg_size[block_parent] * share
    weight *= population / weight.sum()
    pops = h.poisson(weight)
    if pops.max(initial=0) > np.iinfo(np.int32).max:
        raise InvalidParameterError("Invalid population: a block exceeds int32")
    parents = {
        "County": county_parent,
        "Tract": tract_parent,
        "Block_Group": bg_parent,
        "Block": block_parent,
    }
    return parents, pops.astype(np.int32)


def generate_spine(
    seed: int,
    *,
    puerto_rico: bool = False,
    regions: tuple[str, ...] | None = None,
    model: SpineModel | None = None,
    totals: dict[str, SpineTotals] | None = None,
    population: dict[str, int] | None = None,
) -> Spine:
    """The 51-state spine (State indices 0..50, named ``S01``…``S51``), plus Puerto Rico last (``PR``)
    if ``puerto_rico``; or the ``regions`` given, in that order (``("PR",)``: Puerto Rico alone, as
    its own TopDown run). ``totals`` defaults to the 2020 tallies (``SpineTotals.scaled`` for smaller
    spines), ``population`` to the 2020 resident populations. Each region draws from its own keyed
    streams, so a region's part is the same whichever other regions are generated with it."""
    m = model or SpineModel()
    tall = totals or tallies_2020()
    pop = {**POPULATION_2020, **(population or {})}
    if regions is None:
        regions = ("US", "PR") if puerto_rico else ("US",)
    if not regions or len(set(regions)) != len(regions):
        raise InvalidParameterError(f"Invalid regions: {regions!r}; need distinct region names")
    parts = []
    names: list[str] = []
    for r in regions:
        if r not in _REGION_KEYS:
            raise UnknownNameError(f"Unknown region: {r!r}; allowed: {', '.join(REGIONS)}")
        if r not in tall:
            raise UnknownNameError(f"Unknown region: {r!r}; totals given for {', '.join(tall)}")
        if not pop[r] >= 0:
            raise InvalidParameterError(f"Invalid population of {r}: {pop[r]}; need >= 0")
        parts.append(_region(tall[r], m, int(pop[r]), seed, _REGION_KEYS[r]))
        n = tall[r].states
        prefix = "S" if r == "US" else r
        names += [r] if r == "PR" and n == 1 else [f"{prefix}{i + 1:02d}" for i in range(n)]
    parents: dict[str, npt.NDArray[np.int32]] = {}
    for level in LEVELS[1:]:
        up = LEVELS[LEVELS.index(level) - 1]
        offset = 0
        chunks = []
        for (par, _), r in zip(parts, regions, strict=True):
            chunks.append(par[level] + offset)
            offset += tall[r].states if up == "State" else parts[regions.index(r)][0][up].size
        parents[level] = np.concatenate(chunks).astype(np.int32)
    block_pop = np.concatenate([p for _, p in parts])
    return Spine(tuple(names), parents, block_pop, _prims(parents, regions, tall, seed))


def _prims(
    parents: dict[str, npt.NDArray[np.int32]],
    regions: tuple[str, ...],
    totals: dict[str, SpineTotals],
    seed: int,
) -> dict[str, npt.NDArray[np.int32]]:
    """The Prim links of every region (:mod:`~auditlib.geography.spine_prims`), each region from
    its keyed stream ``(SPINE_PRIMS, region)``, concatenated as the regions' units are."""
    links: dict[str, list[IntArray]] = {"Prim": [], "Tract_Subset_Group": [], "Tract": []}
    county0 = tract0 = prim0 = tsg0 = 0
    for r in regions:
        n_counties, n_tracts = totals[r].counties, totals[r].tracts
        county = parents["Tract"][tract0 : tract0 + n_tracts].astype(np.int64) - county0
        rng = seeds.rng(seed, SPINE_PRIMS, _REGION_KEYS[r])
        got = draw_prim_parents(county, n_counties, rng, one_per_county=r == "PR")
        links["Prim"].append(got["Prim"] + county0)
        links["Tract_Subset_Group"].append(got["Tract_Subset_Group"] + prim0)
        links["Tract"].append(got["Tract"] + tsg0)
        county0, tract0 = county0 + n_counties, tract0 + n_tracts
        prim0, tsg0 = prim0 + got["Prim"].size, tsg0 + got["Tract_Subset_Group"].size
    return {k: np.concatenate(v).astype(np.int32) for k, v in links.items()}


def with_population(spine: Spine, block_population: npt.ArrayLike) -> Spine:
    """The same units with other block populations (e.g. a neighbouring database)."""
    bp = np.asarray(block_population)
    if bp.shape != spine.block_population.shape or (bp < 0).any():
        raise InvalidParameterError(
            f"Invalid block_population: need {spine.block_population.shape} counts >= 0"
        )
    return replace(spine, block_population=bp.astype(np.int32))
