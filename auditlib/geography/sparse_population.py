"""Sparse production-schema populations of spine blocks, with the production run's GQ invariants.

Each block's people are drawn person by person (vectorised over a chunk of blocks) and only the
non-zero cells are kept (:class:`~auditlib.geography.sparse_histograms.SparseHistograms`), so the
DHC's 1,227,744-cell histogram costs memory in proportion to the people, not the cells. One draw
gives every person a unit type, relationship, sex, single year of age, Hispanic origin and CENRACE,
from which the production schemas are read (``pl94_production``: hhgq × votingage × hispanic ×
cenrace; ``dhc_production``: relgq × sex × age × hispanic × cenrace) — the same people either way.
``schemas=`` builds the histograms of only some of them: the draws are the same (the same random
stream is consumed), only the histograms not asked for are not built.

Model (block populations from the spine; every rate below is a stated assumption, rounded, not a
published table):

1. **Group quarters.** ``gq_share`` (2.5 %) of the state's people live in group quarters — in the
   2020 Census about 8.2 M of 331 M. ``K`` blocks get one facility each, chosen without replacement
   with probability ∝ their population (weighted reservoir keys, O(blocks)); ``K`` is set so that
   the expected GQ people are ``gq_share`` of the state. A facility's type follows
   :data:`GQ_MAJOR_SHARES` (the seven PL94 major types) and then :data:`GQ_DETAILED_SPLIT` (the DHC's
   24 types). Its block puts ``max(1, Binomial(n_b, gq_fraction))`` people in it, the rest in
   households: every facility has ≥ 1 person (the DAS's ``hhgq_total_lb``).
2. **Housing units.** A block with household people has ``1 + Poisson(h_b / 2.5 − 1)⁺`` housing
   units; an empty one has ``Poisson(vacant_units)`` (vacant) units — so household people imply a
   unit (``hhgq_total_ub``: no unit, no one).
3. **People.** Household members get a relationship from :data:`RELATIONSHIP_SHARES`; age is drawn
   from an age profile per relationship class or GQ major type (:data:`AGE_PROFILES`) truncated to
   the ages the DHC allows the relgq level (its relgq × age structural zeros, ``Constraints_DHCP.py``,
   and ``gq_constr_groups``: e.g. no householder under 15, no foster child over 20, no one under 20
   in nursing facilities, hence PL94's ``nurse_nva_0``); sex from :data:`MALE_SHARE` per class.
4. **Hispanic origin × CENRACE** (126 combinations): a state profile ``Dir(c_state · p₀)`` around
   the national mean :func:`hispanic_cenrace_shares`, a block profile ``Dir(c_block · p_state)``
   (small ``c_block``: segregated blocks, few combinations each) and per-block multinomial counts,
   shuffled over the block's people.

The invariants (:class:`~auditlib.geography.sparse_histograms.GQInvariants`) are the housing units
and facilities per block and the state total — held exact by the production TopDown.
Simplifications: people are not grouped into households (no household invariants such as one
householder per occupied unit); the relationship, age, sex and race draws are independent given the
class; the block's facility types do not depend on its neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from auditlib import seeds
from auditlib.exceptions import InvalidParameterError
from auditlib.geography import census_levels as census
from auditlib.geography.populations import check_populations
from auditlib.geography.schema import schema
from auditlib.geography.sparse_histograms import GQInvariants, SparseHistograms, from_keys
from auditlib.geography.spine import Spine

#: keyed stream of one spine state's sparse population: (SPARSE_POPULATION, state index)
SPARSE_POPULATION = 32

#: share of GQ people by PL94 major type 1..7 (approximately the 2020 Census: correctional
#: 2.0 M, juvenile 0.1 M, nursing 1.3 M, other institutional 0.1 M, college 2.8 M, military
#: 0.3 M, other non-institutional 1.6 M)
GQ_MAJOR_SHARES = (2.0, 0.1, 1.3, 0.1, 2.8, 0.3, 1.6)
#: within each major type, the split over its DHC types (relgq 18..41, in order)
GQ_DETAILED_SPLIT = (
    (0.02, 0.08, 0.55, 0.30, 0.04, 0.01),  # 101-106
    (0.4, 0.3, 0.3),  # 201-203
    (1.0,),  # 301
    (0.4, 0.3, 0.1, 0.05, 0.15),  # 401-405
    (1.0,),  # 501
    (0.8, 0.2),  # 601-602
    (0.25, 0.45, 0.1, 0.01, 0.09, 0.1),  # 701, 801, 802, 900, 901, 997
)
#: relationship shares of household people (relgq 0..17), approximately the 2020 ones
RELATIONSHIP_SHARES = (
    11.7, 27.0, 19.0, 2.8, 0.2, 0.15, 26.0, 0.6, 1.0,
    1.2, 1.2, 2.5, 0.4, 0.4, 2.0, 1.5, 0.07, 1.8,
)  # fmt: skip
#: age-profile class of each relationship (0 householder/partner, 1 child, 2 other)
RELATIONSHIP_CLASS = (0, 0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 1, 2, 2, 2, 2, 1, 2)


def _profile(pieces: tuple[tuple[int, int, float], ...]) -> npt.NDArray[np.float64]:
    """Weights over ages 0..115 from ``(first, last, weight)`` pieces."""
    w = np.zeros(116)
    for a, b, v in pieces:
        w[a : b + 1] = v
    return w / w.sum()


def _decay(start: int, scale: float) -> tuple[tuple[int, int, float], ...]:
    return tuple((a, a, float(np.exp(-(a - start) / scale))) for a in range(start, 116))


#: age weights per class: 0-2 household (householder/partner, child, other), 3-9 GQ major types 1..7
AGE_PROFILES = np.stack(
    [
        _profile(((15, 19, 0.2), (20, 64, 1.0), *_decay(65, 12.0))),
        _profile(((0, 17, 1.0), *_decay(18, 6.0)[:30])),
        _profile(((0, 14, 0.5), (15, 70, 1.0), *_decay(71, 8.0))),
        _profile(((18, 24, 0.8), (25, 49, 1.0), *_decay(50, 8.0)[:40])),
        _profile(((10, 13, 0.2), (14, 17, 1.0), (18, 20, 0.3))),
        _profile(((40, 64, 0.1), *_decay(65, 12.0))),
        _profile(((0, 17, 0.2), (18, 64, 1.0), *_decay(65, 10.0))),
        _profile(((17, 17, 0.3), (18, 22, 1.0), (23, 30, 0.1))),
        _profile(((17, 17, 0.1), (18, 25, 1.0), (26, 45, 0.3))),
        _profile(((0, 17, 0.1), (18, 64, 1.0), *_decay(65, 10.0))),
    ]
)
#: share male per class (as AGE_PROFILES)
MALE_SHARE = (0.49, 0.51, 0.5, 0.9, 0.7, 0.33, 0.5, 0.45, 0.85, 0.6)


def _min_age_by_relgq() -> npt.NDArray[np.int64]:
    """Minimum age of each relgq level: the DHC's ``gq_constr_groups`` (no one under 3, 15, 16 or
    17 in those GQ types) and its relgq × age structural zeros (``Constraints_DHCP.py``: e.g. no
    householder under 15, no one under 20 in nursing facilities, which implies ``nurse_nva_0``)."""
    out = np.array([lo for lo, _ in census.RELGQ_AGE_RANGE], dtype=np.int64)
    groups = dict((name, g) for name, g, _ in census.RELGQ_RECODES)["gq_constr_groups"]
    for g, age in zip(groups[1:5], (3, 15, 16, 17), strict=True):
        out[list(g)] = np.maximum(out[list(g)], age)
    return out


MIN_AGE = _min_age_by_relgq()
#: maximum age of each relgq level (the DHC's structural zeros, e.g. no foster child over 20)
MAX_AGE = np.array([hi for _, hi in census.RELGQ_AGE_RANGE], dtype=np.int64)
#: PL94 major type (1..7) of each relgq GQ level 18..41
_MAJOR = np.array(census.RELGQ_GQ_TO_HHGQ, dtype=np.int64)
#: PL94 hhgq level of each relgq level 0..41 (0: household)
_HHGQ_OF_RELGQ = np.concatenate([np.zeros(census.RELGQ_FIRST_GQ, np.int64), _MAJOR])
#: age-profile class of each relgq level: the relationship's class, or 2 + the GQ major type
_CLASS_OF_RELGQ = np.concatenate([np.array(RELATIONSHIP_CLASS, np.int64), 2 + _MAJOR])
_RELATIONSHIP_P = np.array(RELATIONSHIP_SHARES) / sum(RELATIONSHIP_SHARES)
_MALE = np.array(MALE_SHARE)
#: cumulative age weights per class; per relgq level, its class's weight below its youngest age
#: and up to its oldest (the ends of its truncated profile)
_AGE_CDF = np.cumsum(AGE_PROFILES, axis=1)
_AGE_BELOW = np.concatenate([np.zeros((AGE_PROFILES.shape[0], 1)), _AGE_CDF], axis=1)
_CDF_LO = _AGE_BELOW[_CLASS_OF_RELGQ, MIN_AGE]
_CDF_HI = _AGE_CDF[_CLASS_OF_RELGQ, MAX_AGE]
#: the age of a uniform x by a table: bucket b holds the x in [b/K, (b+1)/K) (x·K is exact), and
#: _AGE_FIRST[c, b] counts class c's cumulative weights below b/K; in a bucket holding none of them
#: that count is the age (``searchsorted(cdf, x, "right")``), in the others (~2 %) it is searched
_AGE_BUCKETS = 1 << 12
_AGE_FIRST = np.stack(
    [np.searchsorted(c, np.arange(_AGE_BUCKETS + 2) / _AGE_BUCKETS) for c in _AGE_CDF]
).ravel()
#: the production schemas, in the order :class:`SparsePopulation` holds them
SCHEMAS = ("pl94_production", "dhc_production")


def hispanic_cenrace_shares() -> npt.NDArray[np.float64]:
    """National mean shares of the 126 (hispanic, cenrace) combinations, hispanic-major.

    Single races from the 2020 PL94-171 national counts; the 33.8 M of two or more races spread over
    the 57 combinations, 90 % of it over the 15 pairs (weighted by the product of the two single
    races' counts, white–sor weighted up: the largest 2020 multiracial group); Hispanic origin is
    90 % among combinations with "some other race", 12 % otherwise (≈ 18.7 % overall)."""
    single = np.array([204.3, 41.1, 3.7, 19.9, 0.7, 27.9])
    w = np.zeros(63)
    w[:6] = single
    combos = [c.split("-") for c in census.CENRACE_LEVELS]
    idx = {r: i for i, r in enumerate(census.RACES)}
    pair = np.array([np.prod([single[idx[r]] for r in c]) if len(c) == 2 else 0.0 for c in combos])
    pair[census.CENRACE_LEVELS.index("white-sor")] *= 6.0
    more = np.array([1.0 if len(c) >= 3 else 0.0 for c in combos])
    w += 33.8 * (0.9 * pair / pair.sum() + 0.1 * more / more.sum())
    p_hisp = np.array([0.9 if "sor" in c else 0.12 for c in combos])
    out = np.concatenate([w * (1 - p_hisp), w * p_hisp])
    return out / out.sum()


@dataclass(frozen=True)
class SparsePopulationModel:
    """Parameters of the sparse population model (module docstring)."""

    gq_share: float = 0.025
    gq_fraction: float = 0.9
    persons_per_unit: float = 2.5
    vacant_units: float = 0.3
    state_concentration: float = 200.0
    block_concentration: float = 0.5
    chunk_people: int = 1 << 21

    def __post_init__(self) -> None:
        for name in ("gq_share", "gq_fraction"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and 0 <= v < 1):
                raise InvalidParameterError(f"Invalid {name}: {v!r}; it must be in [0, 1)")
        for name in ("persons_per_unit", "state_concentration", "block_concentration"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and np.isfinite(v) and v > 0):
                raise InvalidParameterError(f"Invalid {name}: {v!r}; it must be a number > 0")
        if not (isinstance(self.vacant_units, int | float) and self.vacant_units >= 0):
            raise InvalidParameterError(f"Invalid vacant_units: {self.vacant_units!r}; need >= 0")
        if not (isinstance(self.chunk_people, int) and self.chunk_people >= 1):
            raise InvalidParameterError(
                f"Invalid chunk_people: {self.chunk_people!r}; it must be an integer >= 1"
            )


@dataclass(frozen=True)
class SparsePopulation:
    """One state's blocks in the production schemas, with the invariants of each; a schema not
    drawn (``schemas=`` of :func:`sparse_block_population`) has ``None`` for both."""

    pl94: SparseHistograms | None
    dhc: SparseHistograms | None
    pl94_invariants: GQInvariants | None
    dhc_invariants: GQInvariants | None

    def histograms(self, schema_name: str) -> SparseHistograms:
        return self._pick(schema_name)[0]

    def invariants(self, schema_name: str) -> GQInvariants:
        return self._pick(schema_name)[1]

    def _pick(self, schema_name: str) -> tuple[SparseHistograms, GQInvariants]:
        if schema_name == "pl94_production":
            h, inv = self.pl94, self.pl94_invariants
        elif schema_name == "dhc_production":
            h, inv = self.dhc, self.dhc_invariants
        else:
            raise InvalidParameterError(
                f"Invalid schema {schema_name!r}; choose 'pl94_production' or 'dhc_production'"
            )
        if h is None or inv is None:
            raise InvalidParameterError(
                f"Schema {schema_name!r} was not drawn in this population; draw it with "
                f"schemas=({schema_name!r},)"
            )
        return h, inv


def check_schemas(schemas: object) -> tuple[str, ...]:
    """``schemas`` as a tuple of distinct production schema names, at least one."""
    if isinstance(schemas, str) or not isinstance(schemas, tuple | list):
        raise InvalidParameterError(
            f"Invalid schemas: {schemas!r}; give a tuple of schema names, e.g. ('pl94_production',)"
        )
    if not schemas:
        raise InvalidParameterError(f"Invalid schemas: {schemas!r}; name at least one of {SCHEMAS}")
    for name in schemas:
        if name not in SCHEMAS:
            raise InvalidParameterError(
                f"Invalid schema in schemas: {name!r}; choose from {SCHEMAS}"
            )
    if len(set(schemas)) != len(schemas):
        raise InvalidParameterError(f"Invalid schemas: {schemas!r}; a schema is named twice")
    return tuple(schemas)


def _facilities(
    pop: npt.NDArray[np.int64], m: SparsePopulationModel, rng: np.random.Generator
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Blocks holding a facility and its relgq GQ level (18..41)."""
    total = int(pop.sum())
    if total == 0 or m.gq_share == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    size_biased = float((pop.astype(np.float64) ** 2).sum() / total)
    k = round(m.gq_share * total / (m.gq_fraction * size_biased))
    k = min(max(k, 1), int((pop > 0).sum()))
    keys = np.full(pop.size, -np.inf)
    live = pop > 0
    keys[live] = np.log(rng.random(int(live.sum()))) / pop[live]  # Efraimidis–Spirakis keys
    blocks = np.sort(np.argpartition(-keys, k - 1)[:k])
    major = rng.choice(7, size=k, p=np.array(GQ_MAJOR_SHARES) / sum(GQ_MAJOR_SHARES))
    first = np.cumsum([0, *(len(s) for s in GQ_DETAILED_SPLIT)])
    detailed = np.empty(k, dtype=np.int64)
    for t, split in enumerate(GQ_DETAILED_SPLIT):
        sel = major == t
        detailed[sel] = first[t] + rng.choice(len(split), size=int(sel.sum()), p=split)
    return blocks.astype(np.int64), detailed + census.RELGQ_FIRST_GQ


def _people(
    hh: npt.NDArray[np.int64],
    gq: npt.NDArray[np.int64],
    gq_level: npt.NDArray[np.int64],
    profile: npt.NDArray[np.float64],
    m: SparsePopulationModel,
    rng: np.random.Generator,
) -> tuple[npt.NDArray[np.int64], ...]:
    """Person-level (block, relgq, sex, age, hispanic, cenrace) of a chunk of blocks, block-sorted.

    ``hh``/``gq``: household and GQ people per block; ``gq_level``: the block's relgq GQ level
    (any level >= 18 where ``gq == 0``); ``profile``: the state's 126 hispanic × cenrace shares."""
    n_blocks = hh.size
    block = np.repeat(np.arange(n_blocks, dtype=np.int64), hh + gq)
    n = block.size
    # people of a block: its household members first, then its GQ residents
    in_gq = np.repeat(np.tile([False, True], n_blocks), np.column_stack((hh, gq)).ravel())
    relgq = rng.choice(18, size=n, p=_RELATIONSHIP_P)
    relgq[in_gq] = gq_level[block[in_gq]]
    cls = _CLASS_OF_RELGQ[relgq]
    # age: the class's profile truncated to the allowed ages, by inversion of one uniform
    u = rng.random(n)
    below = _CDF_LO[relgq]
    x = _CDF_HI[relgq]
    x -= below
    x *= u
    x += below  # below + u · (upto − below)
    age = _age_of(cls, x)
    np.clip(age, MIN_AGE[relgq], MAX_AGE[relgq], out=age)  # floating point at the range's ends
    sex = (rng.random(n) >= _MALE[cls]).astype(np.int64)  # 0 male, 1 female
    # hispanic x cenrace: a block profile around the state's, multinomial counts, shuffled
    alpha = m.block_concentration * profile
    g = rng.standard_gamma(np.broadcast_to(alpha, (n_blocks, alpha.size)))
    s = g.sum(axis=1, keepdims=True)
    if (s > 0).all():
        g /= s
        q = g
    else:
        q = np.where(s > 0, g / np.where(s > 0, s, 1.0), profile)
    q /= q.sum(axis=1, keepdims=True)
    counts = rng.multinomial(hh + gq, q).ravel()
    some = np.flatnonzero(counts)
    combo = np.repeat(some % alpha.size, counts[some])  # each block's combinations, in order
    combo = combo[_shuffle_order(block, rng.random(n))]
    hisp, race = np.divmod(combo, 63)
    return block, relgq, sex, age, hisp, race


def _age_of(cls: npt.NDArray[np.int64], x: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """``searchsorted(_AGE_CDF[c], x, side="right")`` of each person's class ``c``, by the table
    :data:`_AGE_FIRST` (a search only where ``x``'s bucket holds one of the class's cumulative
    weights)."""
    bucket = np.clip(x * _AGE_BUCKETS, 0, _AGE_BUCKETS).astype(np.int64)
    at = cls * (_AGE_BUCKETS + 2) + bucket
    age = _AGE_FIRST[at]
    near = np.flatnonzero(age != _AGE_FIRST[at + 1])
    near_cls = cls[near]
    for c in np.unique(near_cls):
        sel = near[near_cls == c]
        age[sel] = np.searchsorted(_AGE_CDF[c], x[sel], side="right")
    return age


#: blocks sorted at once by :func:`_shuffle_order`: their index fits in the 11 bits left by 53
_SHUFFLE_BLOCKS = 1 << 11


def _shuffle_order(
    block: npt.NDArray[np.int64], u: npt.NDArray[np.float64]
) -> npt.NDArray[np.int64]:
    """``np.lexsort((u, block))`` for a non-decreasing ``block`` >= 0 and ``u`` in [0, 1): the
    order by block, then ``u``, then position.

    Sorted a group of blocks at a time on one unsigned key (the block in the group, then ``u``'s
    53 bits of ``Generator.random``), stably (merges of the blocks' runs; about 8 times faster than
    ``lexsort``); a group where two keys tie falls back on ``lexsort``, so the order is the same for
    any ``u``."""
    n = block.size
    out = np.empty(n, dtype=np.int64)
    if n == 0:
        return out
    bits = (u * 2.0**53).astype(np.uint64)  # exact for multiples of 2**-53; else monotone
    groups = int(block[-1]) // _SHUFFLE_BLOCKS + 1
    edges = np.searchsorted(block, np.arange(groups + 1) * _SHUFFLE_BLOCKS)
    for i in range(edges.size - 1):
        a, b = int(edges[i]), int(edges[i + 1])
        if a == b:
            continue
        rel = (block[a:b] - i * _SHUFFLE_BLOCKS).astype(np.uint64)
        key = (rel << np.uint64(53)) | bits[a:b]
        order = np.argsort(key, kind="stable")  # runs of blocks: quicker than quicksort
        ranked = key[order]
        if (ranked[1:] == ranked[:-1]).any():
            order = np.lexsort((u[a:b], block[a:b]))
        out[a:b] = order + a
    return out


def _sparse(
    n_cells: int, block: npt.NDArray[np.int64], cell: npt.NDArray[np.int64], offset: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Sorted distinct keys ``(block + offset) · n_cells + cell`` and their counts (``np.unique``'s)
    of block-sorted people: a stable sort, which finds the blocks' runs."""
    key = np.sort(block * n_cells + cell, kind="stable")
    if key.size == 0:
        return key, np.zeros(0, dtype=np.int64)
    first = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
    counts = np.diff(np.append(first, key.size))
    return key[first] + offset * n_cells, counts


def sparse_block_population(
    block_population: npt.ArrayLike,
    rng: np.random.Generator,
    *,
    model: SparsePopulationModel | None = None,
    schemas: tuple[str, ...] = SCHEMAS,
) -> SparsePopulation:
    """Sparse histograms of blocks with the given populations in the production ``schemas`` (default
    both), with their invariants (module docstring). The draws do not depend on ``schemas``: a
    schema's histograms are the same drawn alone or with the other."""
    m = model or SparsePopulationModel()
    wanted = check_schemas(schemas)
    pop = check_populations(block_population)
    n_blocks = pop.size
    fac_block, fac_level = _facilities(pop, m, rng)
    gq = np.zeros(n_blocks, dtype=np.int64)
    gq_level = np.full(n_blocks, census.RELGQ_FIRST_GQ, dtype=np.int64)
    gq[fac_block] = np.maximum(1, rng.binomial(pop[fac_block], m.gq_fraction))
    gq_level[fac_block] = fac_level
    hh = pop - gq
    units = np.zeros((n_blocks, 25), dtype=np.int32)
    occupied = hh > 0
    extra = np.maximum(hh / m.persons_per_unit - 1.0, 0.0)
    units[:, 0] = np.where(
        occupied, 1 + rng.poisson(extra), rng.poisson(m.vacant_units * (pop == 0))
    )
    units[fac_block, fac_level - (census.RELGQ_FIRST_GQ - 1)] = 1
    p0 = hispanic_cenrace_shares()
    g = rng.standard_gamma(m.state_concentration * p0)
    profile = g / g.sum() if g.sum() > 0 else p0
    keys: dict[str, list[npt.NDArray[np.int64]]] = {name: [] for name in wanted}
    counts: dict[str, list[npt.NDArray[np.int64]]] = {name: [] for name in wanted}
    pl94, dhc = schema("pl94_production"), schema("dhc_production")
    cum = np.cumsum(pop)
    a = 0
    while a < n_blocks:  # chunks of whole blocks holding about chunk_people people
        before = int(cum[a - 1]) if a else 0
        b = max(a + 1, int(np.searchsorted(cum, before + m.chunk_people, side="right")))
        b = min(b, n_blocks)
        blk, relgq, sex, age, hisp, race = _people(hh[a:b], gq[a:b], gq_level[a:b], profile, m, rng)
        for name in wanted:
            if name == "pl94_production":
                adult = (age >= 18).astype(np.int64)
                cell = np.ravel_multi_index((_HHGQ_OF_RELGQ[relgq], adult, hisp, race), pl94.shape)
                n_cells = pl94.n_cells
            else:
                cell = np.ravel_multi_index((relgq, sex, age, hisp, race), dhc.shape)
                n_cells = dhc.n_cells
            k, c = _sparse(n_cells, blk, cell, a)
            keys[name].append(k)
            counts[name].append(c)
        a = b
    total = int(pop.sum())
    hist = {
        name: from_keys(name, _cat(keys[name]), _cat(counts[name]), n_blocks) for name in wanted
    }
    inv = {name: GQInvariants(name, _units(name, units), total) for name in wanted}
    return SparsePopulation(
        hist.get("pl94_production"),
        hist.get("dhc_production"),
        inv.get("pl94_production"),
        inv.get("dhc_production"),
    )


def _units(schema_name: str, units: npt.NDArray[np.int32]) -> npt.NDArray[np.int32]:
    """Housing units and facilities per block by the schema's unit types, from the DHC's 25."""
    if schema_name == "dhc_production":
        return units
    pl94_units = np.zeros((units.shape[0], 8), dtype=np.int32)
    pl94_units[:, 0] = units[:, 0]
    for j, major in enumerate(_MAJOR):
        pl94_units[:, major] += units[:, 1 + j]
    return pl94_units


def _cat(parts: list[npt.NDArray[np.int64]]) -> npt.NDArray[np.int64]:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def spine_state_sparse_population(
    spine: Spine,
    state: int,
    seed: int,
    *,
    model: SparsePopulationModel | None = None,
    schemas: tuple[str, ...] = SCHEMAS,
) -> SparsePopulation:
    """The sparse population of one spine state's blocks (0-based state; blocks in spine order) in
    the production ``schemas`` (default both), from the keyed stream ``(SPARSE_POPULATION, state)``:
    independent of which other states are drawn, or where, and of ``schemas``."""
    if isinstance(state, bool) or not isinstance(state, int | np.integer):
        raise InvalidParameterError(f"Invalid state: {state!r}; give a state index")
    if not 0 <= state < spine.n_states:
        raise InvalidParameterError(
            f"Invalid state: {state!r}; the spine has states 0..{spine.n_states - 1}"
        )
    block_state = spine.state_of("Block")
    lo, hi = np.searchsorted(block_state, [state, state + 1])
    rng = seeds.rng(seed, SPARSE_POPULATION, int(state))
    return sparse_block_population(spine.block_population[lo:hi], rng, model=model, schemas=schemas)
