"""The population sources a spec names, read and checked where the spec is validated and where
its plan is made: tables of real counts, the US spine's states and levels, and the allocation's
queries a TopDown release measures."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from auditlib.allocations import load_allocation
from auditlib.geography import NATIONAL

if TYPE_CHECKING:
    from flows.spec.audit_plan import TableHierarchyParams, TableParams
    from flows.spec.model import AuditSpec


def load_table(
    path: str,
    counts: tuple[str, ...],
    levels: tuple[str, ...],
    unit: str,
    attributes: str = "",
    unique: bool = False,
) -> Any:
    """A table of real counts (``read_counts``; cached per process and file version: a worker
    reads it once). ``attributes``: the schema the count columns are the cells of (""): one
    attribute whose levels are the columns); ``unique``: the hierarchy columns hold identifiers
    (a unit under two parents is refused)."""
    import os

    try:
        st = os.stat(path)
        version = (st.st_mtime_ns, st.st_size)
    except OSError:
        version = (0, 0)  # read_counts names the missing file
    return _load_table(path, version, counts, levels, unit, attributes, unique)


@functools.lru_cache(maxsize=4)
def _load_table(
    path: str,
    version: tuple[int, int],
    counts: tuple[str, ...],
    levels: tuple[str, ...],
    unit: str,
    attributes: str = "",
    unique: bool = False,
) -> Any:
    from auditlib.geography.schema import schema
    from auditlib.geography.tabular import read_counts

    return read_counts(
        path,
        counts,
        levels=levels,
        unit=unit or None,
        schema=schema(attributes) if attributes else None,
        unique_labels=unique,
    )


def table_level_map(
    allocation_levels: tuple[str, ...], file_levels: tuple[str, ...], mapping: dict[str, str]
) -> tuple[str, ...]:
    """The allocation geolevel measured at each of a table's levels (``file_levels``: root,
    hierarchy columns, unit), from ``release.levels`` (allocation geolevel -> file level, "": not
    simulated; a geolevel that is itself a file level may be left out). ``ValueError`` naming the
    geolevel or file level and the fix."""
    for g in mapping:
        if g not in allocation_levels:
            raise ValueError(
                f"release.levels names {g!r}, not a geolevel of the allocation; its geolevels "
                f"are {', '.join(allocation_levels)}"
            )
    at: dict[str, str] = {}  # file level -> allocation geolevel
    for g in allocation_levels:
        if g not in mapping and g not in file_levels:
            raise ValueError(
                f"release.levels has no mapping for the allocation's geolevel {g!r}; map it to "
                f'one of the table\'s levels {", ".join(file_levels)}, or to "" to leave it '
                f'unsimulated, e.g. release.levels = {{{g} = "{file_levels[-1]}"}}'
            )
        f = mapping.get(g, g)
        if not f:
            continue
        if f not in file_levels:
            raise ValueError(
                f"release.levels maps {g!r} to {f!r}, not a level of the table; its levels are "
                f"{', '.join(file_levels)} (the root, population.levels, population.unit)"
            )
        if f in at:
            raise ValueError(
                f"release.levels maps both {at[f]!r} and {g!r} to the table's level {f!r}; map "
                'one geolevel per level and the other to "" (unsimulated)'
            )
        at[f] = g
    unmapped = [f for f in file_levels if f not in at]
    if unmapped:
        raise ValueError(
            f"the table's level {unmapped[0]!r} has no geolevel of the allocation measured at "
            f"it; map one there with release.levels (geolevels: {', '.join(allocation_levels)})"
        )
    measured = tuple(at[f] for f in file_levels)
    if [allocation_levels.index(g) for g in measured] != sorted(
        allocation_levels.index(g) for g in measured
    ):
        pairs = ", ".join(f"{g} -> {f}" for f, g in zip(file_levels, measured, strict=True))
        raise ValueError(
            f"release.levels ({pairs}) does not keep the allocation's top-down order on the "
            f"table's levels {', '.join(file_levels)}; map higher geolevels to higher levels"
        )
    return measured


def load_observed(
    path: str,
    counts: tuple[str, ...],
    levels: tuple[str, ...],
    unit: str,
    published: tuple[tuple[str, ...], ...],
    published_files: tuple[str, ...],
    integer: bool,
    attributes: str = "",
) -> Any:
    """A published release beside its truth (``read_observed``; cached per process and version of
    every file it reads); ``attributes``: the schema the count columns are the cells of ("": one
    attribute whose levels are the columns)."""
    import os

    versions = []
    for f in (path, *published_files):
        try:
            st = os.stat(f)
            versions.append((st.st_mtime_ns, st.st_size))
        except OSError:
            versions.append((0, 0))  # read_observed names the missing file
    return _load_observed(
        path, counts, levels, unit, published, published_files, integer, attributes, tuple(versions)
    )


@functools.lru_cache(maxsize=4)
def _load_observed(
    path: str,
    counts: tuple[str, ...],
    levels: tuple[str, ...],
    unit: str,
    published: tuple[tuple[str, ...], ...],
    published_files: tuple[str, ...],
    integer: bool,
    attributes: str,
    versions: tuple[tuple[int, int], ...],
) -> Any:
    from auditlib.geography.observed import read_observed
    from auditlib.geography.schema import schema

    return read_observed(
        path,
        counts,
        levels=levels,
        unit=unit or None,
        published=published,
        published_files=published_files,
        integer=integer,
        schema=schema(attributes) if attributes else None,
    )


#: the ``pl94`` schema's reduced race stands for the allocations' CENRACE
SCHEMA_ALIASES: dict[str, dict[str, str]] = {"pl94": {"cenrace": "race"}}


def topdown_measured(
    allocation: str,
    geolevels: tuple[str, ...],
    attributes: str,
    neighbours: str,
    universe: str,
    region: str,
    on_spine: bool = False,
    spine_top: bool = False,
) -> list[list[tuple[str, float]]]:
    """Per geolevel (``on_spine``: those the spine simulates; ``spine_top``: the spine's upper
    levels only, ``release.lowest_level``), the allocation's queries the attribute schema
    expresses, with their σ²; the others (e.g. ``hhgq``, which no shipped schema has) are left out
    on purpose."""
    from auditlib.geography.schema import schema
    from auditlib.simulate.measured import allocation_measured, unexpressible_queries

    sch = schema(attributes)
    alloc = load_allocation(allocation)
    levels = spine_geolevels(geolevels, spine_top) if on_spine else geolevels
    aliases = SCHEMA_ALIASES.get(sch.name)
    detailed = " * ".join(sch.attribute_names)
    # a schema with recodes (the production ones) expresses every query keeping them, too
    recoded = sch if sch.recode_names else None
    skip = unexpressible_queries(
        alloc,
        levels,
        sch.query_names,
        universe,
        region,
        attribute_aliases=aliases,
        detailed_as=detailed,
        schema=recoded,
    )
    return allocation_measured(
        alloc,
        levels,
        sch.query_names,
        neighbours,
        universe,
        region,
        attribute_aliases=aliases,
        detailed_as=detailed,
        skip=skip,
        schema=recoded,
    )


#: the spine level each allocation geolevel stands on: the DHC's Prim and Tract_Subset_Group are
#: the spine's drawn ones (``auditlib.geography.spine_prims``: drawn, not the real Prims), its
#: Tract_Subset the spine's tracts (under their Tract_Subset_Groups)
SPINE_LEVEL_OF: dict[str, str] = {
    "State": "State",
    "County": "County",
    "Prim": "Prim",
    "Tract_Subset_Group": "Tract_Subset_Group",
    "Tract": "Tract",
    "Tract_Subset": "Tract",
    "Block_Group": "Block_Group",
    "Block": "Block",
}


def spine_geolevels(allocation_levels: tuple[str, ...], top: bool = False) -> tuple[str, ...]:
    """The allocation's geolevels simulated on the spine (US, if present, first; then one per spine
    level, in spine order: the spine's five, with Prim and Tract_Subset_Group where the allocation
    has them), named as the allocation names them. ``top``: the spine's upper levels, from State
    down to some level (the allocation's levels cut at ``release.lowest_level``)."""
    from auditlib.geography.spine import LEVELS, PRIM_LEVELS

    kept = tuple(g for g in allocation_levels if g == NATIONAL or g in SPINE_LEVEL_OF)
    on_spine = spine_levels(kept)
    core = tuple(g for g in on_spine if g in LEVELS)
    expected = LEVELS[: max(len(core), 1)] if top else LEVELS
    if core != expected or on_spine != tuple(g for g in PRIM_LEVELS if g in on_spine):
        raise ValueError(
            f"the allocation's geolevels {', '.join(allocation_levels)} do not map one to one onto "
            f"the spine's {', '.join(LEVELS)} (with Prim and Tract_Subset_Group between County "
            "and Tract, if any); use an allocation with those levels"
        )
    return kept


def spine_levels(geolevels: tuple[str, ...]) -> tuple[str, ...]:
    """The spine level each of a plan's geolevels (the nation left out) stands on, in order: the
    levels of one state's run on the spine (``spine_state``'s ``levels``)."""
    return tuple(SPINE_LEVEL_OF[g] for g in geolevels if g != NATIONAL)


def spine_state_labels(region: str) -> tuple[str, ...]:
    """Labels of the spine's states of a region: ST01..ST51 (the spine's S01..S51) or PR."""
    from auditlib.geography.spine import tallies_2020

    if region == "PR":
        return ("PR",)
    return tuple(f"ST{i:02d}" for i in range(1, tallies_2020()[region].states + 1))


def spine_state_indices(region: str, wanted: str | int | list[str]) -> tuple[int, ...]:
    """Spine indices of ``population.spine_states``; ``ValueError`` naming a bad state and the fix."""
    labels = spine_state_labels(region)
    if wanted == "all":
        return tuple(range(len(labels)))
    if isinstance(wanted, int):
        if wanted > len(labels):
            raise ValueError(
                f"population.spine_states = {wanted}: region {region!r} has {len(labels)} "
                f'state(s); use 1..{len(labels)} or "all"'
            )
        return tuple(range(wanted))
    if not wanted:
        raise ValueError('population.spine_states = []: name at least one state, or use "all"')
    out = []
    for name in wanted:
        if name not in labels:
            raise ValueError(
                f"population.spine_states has unknown state {name!r} for region {region!r}; "
                f"allowed: {labels[0]}..{labels[-1]}"
                + (' (Puerto Rico: audit.region = "PR")' if name == "PR" else "")
            )
        if labels.index(name) in out:
            raise ValueError(f"population.spine_states repeats {name!r}; name each state once")
        out.append(labels.index(name))
    return tuple(sorted(out))


#: spines this process has generated (``load_spine``'s cache misses)
_spines_generated = 0


def spines_generated() -> int:
    """How many spines this process has generated: a run generates its spine once, in the flow's
    process, and shares it with its workers (``flows.audit.spine_share``)."""
    return _spines_generated


@functools.lru_cache(maxsize=2)
def load_spine(seed: int, region: str) -> Any:
    """The spine of one region (cached per process)."""
    from auditlib.geography.spine import generate_spine

    global _spines_generated
    _spines_generated += 1
    return generate_spine(seed, regions=(region,))


def table_hierarchy(t: TableHierarchyParams) -> Any:
    """The table a TopDown plan runs on (``read_counts``: identifiers, the schema's cells)."""
    return load_table(t.path, t.counts, t.levels, t.unit, t.attributes, unique=True)


def table_tree(t: TableParams) -> Any:
    """The table's tree of total counts: a root over its top level, then every level."""
    return load_table(t.path, t.counts, t.levels, t.unit, t.attributes).count_tree()


def observed_args(spec: AuditSpec) -> tuple[Any, ...]:
    """The arguments of :func:`flows.spec.sources.load_observed` a spec names."""
    p, r = spec.population, spec.release
    return (
        p.path,
        tuple(p.counts),
        p.level_columns,
        p.unit,
        tuple(tuple(run) for run in r.published),
        tuple(r.published_files),
        r.published_integer,
        observed_schema(spec),
    )


def observed_schema(spec: AuditSpec) -> str:
    """The schema an observed table's count columns are the cells of: ``population.attributes``
    when set (or the release is declared post-processed), else "" (one attribute whose levels
    are the columns)."""
    p, r = spec.population, spec.release
    return p.attributes if r.post_processing != "none" or p.attributes != "total" else ""
