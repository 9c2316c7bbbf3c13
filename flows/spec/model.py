"""The audit spec as a whole: its sections (``flows.spec.sections``, ``flows.spec.cluster``) and the
checks across them (a release the population supports, queries and geolevels of the allocation,
a table or spine that can be read).

Unknown keys are rejected; every error names the field, the bad value and what is allowed. A default
spec ships with the package (``flows/spec/default_spec.toml``); ``dpaudit spec`` prints it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, ValidationError, model_validator

from auditlib.allocations import load_allocation
from flows.spec.cluster import ClusterSection
from flows.spec.epl_section import EPLSection
from flows.spec.mpl_section import MPLSection
from flows.spec.production import production_combination
from flows.spec.published import check_published
from flows.spec.sections import (
    DEFAULT_FANOUT,
    GEOMETRIC_RELEASES,
    OBSERVED_ONLY,
    RELEASES_OF,
    TABLE_ONLY,
    TABLE_ROOT,
    TABLE_TOPDOWN_RELEASES,
    AccountingSection,
    AuditSection,
    OutputSection,
    PopulationSection,
    ReleaseSection,
    SimulationSection,
    Strict,
)
from flows.spec.sources import (
    load_observed,
    load_table,
    observed_args,
    spine_geolevels,
    spine_state_indices,
    table_level_map,
    topdown_measured,
)
from flows.spec.toml_writer import dump_toml


def _defaults(cls: type[BaseModel]) -> Any:
    return lambda: cls()


class AuditSpec(Strict):
    audit: AuditSection = Field(default_factory=_defaults(AuditSection))
    population: PopulationSection = Field(default_factory=_defaults(PopulationSection))
    release: ReleaseSection = Field(default_factory=_defaults(ReleaseSection))
    simulation: SimulationSection = Field(default_factory=_defaults(SimulationSection))
    epl: EPLSection = Field(default_factory=_defaults(EPLSection))
    accounting: AccountingSection = Field(default_factory=_defaults(AccountingSection))
    mpl: MPLSection = Field(default_factory=_defaults(MPLSection))
    output: OutputSection = Field(default_factory=_defaults(OutputSection))
    cluster: ClusterSection = Field(default_factory=_defaults(ClusterSection))

    @model_validator(mode="after")
    def _against_allocation(self) -> AuditSpec:
        geometric = self.release.kind in GEOMETRIC_RELEASES
        kind = self.population.kind
        production_combination(kind, self.release.kind, self.population.attributes)
        if self.release.kind not in RELEASES_OF[kind]:
            valid = "; ".join(f"{k}: {', '.join(v)}" for k, v in RELEASES_OF.items())
            needs = [k for k, v in RELEASES_OF.items() if self.release.kind in v]
            raise ValueError(
                f"release.kind = {self.release.kind!r} needs population.kind = "
                f"{' or '.join(repr(k) for k in needs)} (got {kind!r}); valid combinations "
                f"(population: releases) are {valid}"
            )
        if self.release.epsilon_strata is not None and self.release.kind != "sa3":
            raise ValueError(
                f"release.epsilon_strata = {self.release.epsilon_strata!r} is a setting of "
                f'release.kind = "sa3" (got {self.release.kind!r}); drop it'
            )
        if self.release.levels and (
            kind != "table" or self.release.kind not in (*TABLE_TOPDOWN_RELEASES, "observed")
        ):
            raise ValueError(
                "release.levels maps the allocation's geolevels onto a table's levels; it is a "
                'setting of release.kind = "topdown", "published" or "observed" with '
                'population.kind = "table": drop it'
            )
        if self.release.lowest_level and (kind != "spine" or self.release.kind != "topdown"):
            raise ValueError(
                f"release.lowest_level = {self.release.lowest_level!r} stops a TopDown release "
                'on the spine (release.kind = "topdown", population.kind = "spine"); drop it'
            )
        if self.release.kind != "observed":
            named = [k for k in OBSERVED_ONLY if getattr(self.release, k)]
            fresh = ReleaseSection()
            named += [
                k
                for k in ("post_processing", "reference_runs")
                if getattr(self.release, k) != getattr(fresh, k)
            ]
            if named:
                raise ValueError(
                    f"release.{named[0]} is a setting of an observed release (published DP counts "
                    "audited beside the true ones); drop it or set "
                    'release.kind = "observed"'
                )
        if kind != "table":
            given = [k for k in TABLE_ONLY if getattr(self.population, k)]
            if isinstance(self.population.levels, list):
                given = ["levels", *given]
            if given:
                raise ValueError(
                    f"population.{given[0]} is a setting of a table of counts; drop it or set "
                    'population.kind = "table"'
                )
        if kind == "table":
            self._check_table()
            return self
        if kind == "spine":
            self._check_spine()
        elif self.population.spine_states != "all":
            raise ValueError(
                f"population.spine_states = {self.population.spine_states!r} needs "
                f'population.kind = "spine" (got {kind!r}); drop it or set kind = "spine"'
            )
        if geometric:
            from auditlib.geography.flaxman import children_per_unit

            p = self.population
            try:
                c = children_per_unit(p.people, p.depth, p.mean_per_location)
            except Exception as exc:  # the generator names the bad value
                raise ValueError(f"population: {exc}") from None
            if c**p.depth > 50_000_000:
                raise ValueError(
                    f"population: {c}^{p.depth} leaves is too many; lower people or levels"
                )
            return self
        alloc = load_allocation(self.audit.allocation)
        a = self.audit
        a.check_scope(alloc)
        levels = self.geolevels
        below_state = [g for g in levels if g not in ("US", "State")]
        for g in self.population.fanout:
            if g not in below_state:
                raise ValueError(
                    f"population.fanout has unknown geolevel {g!r}; allowed: {', '.join(below_state)}"
                )
        if isinstance(self.simulation.queries, list):
            names = {q.query for q in alloc.select(a.universe, a.region)}
            for q in self.simulation.queries:
                if q not in names:
                    raise ValueError(
                        f"simulation.queries has unknown query {q!r}; allowed: {', '.join(sorted(names))}"
                    )
        if self.release.kind == "topdown":
            try:
                topdown_measured(
                    a.allocation,
                    self.geolevels,
                    self.population.attributes,
                    a.neighbours,
                    a.universe,
                    a.region,
                    on_spine=kind == "spine",
                    spine_top=bool(self.release.lowest_level),
                )
            except Exception as exc:  # names the allocation, level and schema
                raise ValueError(
                    f"population.attributes = {self.population.attributes!r}: {exc}"
                ) from None
        if a.region == "PR" and kind != "spine" and self.population.states != 1:
            raise ValueError("population.states must be 1 for region 'PR' (Puerto Rico is one run)")
        return self

    def _check_table(self) -> None:
        p = self.population
        p.refuse_synthetic_settings("a table has its own units and counts")
        if isinstance(p.levels, int):
            raise ValueError(
                f"population.levels = {p.levels!r}: a table names its hierarchy columns, "
                'e.g. levels = ["state"] (or [] for none)'
            )
        if not p.path:
            raise ValueError(
                'population.kind = "table" needs population.path (a CSV or Parquet file)'
            )
        topdown = self.release.kind in TABLE_TOPDOWN_RELEASES
        if not p.counts and not topdown:
            raise ValueError(
                'population.kind = "table" needs population.counts, e.g. counts = ["total"]'
            )
        if TABLE_ROOT in (*p.level_columns, p.unit):
            raise ValueError(
                f"population: a column named {TABLE_ROOT!r} clashes with the table's root level; "
                "rename the column"
            )
        if self.release.kind == "sa4" and not p.level_columns:
            raise ValueError(
                'release.kind = "sa4" holds the totals of the last population.levels column '
                'invariant; name one, e.g. levels = ["county"]'
            )
        try:
            if self.release.kind == "observed":
                self._check_observed()
            else:
                load_table(
                    p.path,
                    self.table_counts,
                    p.level_columns,
                    p.unit,
                    p.attributes if topdown else "",
                    unique=topdown,
                )
        except Exception as exc:  # read_counts names the file, column or row
            msg = str(exc)  # a missing file's message already names the path
            if topdown and not p.counts and "Missing columns" in msg:
                msg += (
                    f"; population.counts is unset, so the count columns are named by the cells "
                    f"of population.attributes = {p.attributes!r}: name them, or list yours in "
                    "population.counts (in the schema's cell order)"
                )
            named = any(f in msg for f in (p.path, *self.release.published_files))
            named = named or msg.startswith(("release.", "population.", "audit."))
            raise ValueError(msg if named else f"population.path = {p.path!r}: {msg}") from None
        if topdown:
            self._check_table_topdown()
        if self.release.kind == "published":
            check_published(self)

    def _check_table_topdown(self) -> None:
        """A TopDown release of a table: the allocation's scope, its geolevels mapped onto the
        table's levels (``release.levels``), its queries expressible in the schema."""
        a = self.audit
        alloc = load_allocation(a.allocation)
        a.check_scope(alloc)
        measured = self.table_measured_geolevels
        try:
            topdown_measured(
                a.allocation,
                measured,
                self.population.attributes,
                a.neighbours,
                a.universe,
                a.region,
            )
        except Exception as exc:  # names the allocation, level and schema
            raise ValueError(
                f"population.attributes = {self.population.attributes!r}: {exc}"
            ) from None

    @property
    def table_counts(self) -> tuple[str, ...]:
        """A table's count columns: ``population.counts``; unset under a TopDown release, the
        cells of ``population.attributes`` (e.g. ``"total"``, or pl94's
        ``"under18/not_hispanic/white"``, ...) in the schema's order."""
        p = self.population
        if p.counts or self.release.kind not in TABLE_TOPDOWN_RELEASES:
            return tuple(p.counts)
        from auditlib.geography.schema import schema

        sch = schema(p.attributes)
        return (
            sch.cell_labels(" * ".join(sch.attribute_names)) if sch.attribute_names else ("total",)
        )

    @property
    def table_measured_geolevels(self) -> tuple[str, ...]:
        """TopDown on a table: the allocation geolevel measured at each of the table's levels
        (``geolevels``), from ``release.levels``; ``ValueError`` naming an unmapped level."""
        a = self.audit
        alloc_levels = load_allocation(a.allocation).geolevels(a.universe, a.region)
        return table_level_map(alloc_levels, self.geolevels, dict(self.release.levels))

    def _check_observed(self) -> None:
        """An observed release: its runs read and checked, the declared allocation's levels."""
        r, a = self.release, self.audit
        if not r.published and not r.published_files:
            raise ValueError(
                'release.kind = "observed" needs the published counts: release.published (per '
                'run, its columns of population.path, e.g. [["persons_dp1"], ["persons_dp2"]]) '
                "or release.published_files (one file per run)"
            )
        if r.published and r.published_files:
            raise ValueError(
                "release.published and release.published_files both given; give the runs one way"
            )
        alloc = load_allocation(a.allocation)
        if a.universe not in alloc.universes() or a.region not in alloc.regions(a.universe):
            raise ValueError(
                f"audit.universe = {a.universe!r}, audit.region = {a.region!r}: not both in "
                f"allocation {a.allocation!r}, whose accounting an observed release is audited "
                f"against; allowed universes: {', '.join(alloc.universes())}"
            )
        load_observed(*observed_args(self))
        if r.post_processing == "none" and r.reference_runs != ReleaseSection().reference_runs:
            raise ValueError(
                'release.reference_runs is a setting of release.post_processing = "topdown" '
                "(the runs of dpaudit's TopDown the published runs are tested against); drop it"
            )
        if r.post_processing != "none":
            self.reference_spec()  # names a bad schema, mapping or count column
        _ = self.observed_measured_as  # names a bad release.levels entry

    def reference_spec(self) -> AuditSpec:
        """An observed release declared post-processed (``release.post_processing``): the release
        it is declared to be — dpaudit's own TopDown of the declared allocation on the table's
        true counts, ``release.reference_runs`` replicates — whose runs its residuals are tested
        against; ``ValueError`` naming what that release cannot be built from."""
        r = self.release
        if r.kind != "observed" or r.post_processing == "none":
            raise ValueError("reference_spec: the spec declares no post-processed release")
        d = self.model_dump(mode="json")
        d["release"] = {"kind": "topdown", "tolerance": r.tolerance, "levels": dict(r.levels)}
        d["audit"]["replicates"] = r.reference_runs
        try:
            return AuditSpec.model_validate(d)
        except ValidationError as exc:  # the TopDown checks name the schema, level or column
            detail = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
            raise ValueError(
                f'release.post_processing = "{r.post_processing}": the declared release cannot '
                f"be simulated on this table — {detail}"
            ) from None

    @property
    def observed_measured_as(self) -> dict[str, str]:
        """An observed release: the declared allocation's geolevel measured at the table's rows
        -> ``population.unit`` (its levels above are sums of the rows: not measured on their
        own). From ``release.levels`` (allocation geolevel -> table level, "" for none), else the
        allocation's last geolevel; ``ValueError`` naming a bad entry."""
        a, unit = self.audit, self.geolevels[-1]
        if self.release.post_processing != "none":  # every level of the table is measured
            measured = self.table_measured_geolevels
            return {g: t for g, t in zip(measured, self.geolevels, strict=True) if g}
        alloc_levels = load_allocation(a.allocation).geolevels(a.universe, a.region)
        mapping = dict(self.release.levels)
        if not mapping:
            return {alloc_levels[-1]: unit}
        out: dict[str, str] = {}
        for g, f in mapping.items():
            if g not in alloc_levels:
                raise ValueError(
                    f"release.levels names {g!r}, not a geolevel of the allocation; its "
                    f"geolevels are {', '.join(alloc_levels)}"
                )
            if f and f != unit:
                raise ValueError(
                    f"release.levels maps {g!r} to {f!r}: a published release's levels above its "
                    f"rows are sums of the rows, not measured on their own; map {g!r} to the "
                    f'rows ({unit!r}) or to "" (not published)'
                )
            if f:
                out[g] = f
        if len(out) > 1:
            raise ValueError(
                f"release.levels maps {', '.join(map(repr, out))} all to the rows {unit!r}; "
                'map one geolevel there and the others to ""'
            )
        return out

    def _check_spine(self) -> None:
        p = self.population
        p.refuse_synthetic_settings("the spine has its own units and people")
        spine_state_indices(self.audit.region, p.spine_states)  # names the bad state
        lowest = self.release.lowest_level
        if lowest:
            a = self.audit
            levels = load_allocation(a.allocation).geolevels(a.universe, a.region)
            allowed = [g for g in levels if g != "US"]
            if lowest not in allowed:
                raise ValueError(
                    f"release.lowest_level has unknown geolevel {lowest!r}; allowed: "
                    f"{', '.join(allowed)} (the nation is the sum of the states)"
                )
            try:
                spine_geolevels(levels)  # the whole allocation maps onto the spine
            except ValueError as exc:
                raise ValueError(f"population.attributes = {p.attributes!r}: {exc}") from None

    @model_validator(mode="after")
    def _mpl_settings(self) -> AuditSpec:
        m = self.mpl
        if not m.enabled:
            return self
        if self.population.kind == "table":
            raise ValueError(
                'mpl.enabled with population.kind = "table": MPL tests synthetic and Flaxman 2019 '
                "populations; set mpl.enabled = false"
            )
        if self.release.kind not in ("allocation", "gdpc"):
            raise ValueError(
                f"mpl.enabled with release.kind = {self.release.kind!r}: MPL tests 'allocation' "
                "and 'gdpc' releases; set mpl.enabled = false"
            )
        levels = self.geolevels
        for g in self.mpl_geolevels:
            if g not in levels:
                raise ValueError(
                    f"mpl.geolevels has unknown geolevel {g!r}; allowed: {', '.join(levels)}"
                )
        if self.release.kind == "gdpc" and self.mpl_geolevels != (levels[-1],):
            raise ValueError(
                f"mpl.geolevels = {list(self.mpl_geolevels)}: GDPC releases the leaves only; "
                f'use geolevels = ["{levels[-1]}"]'
            )
        if m.query and self.release.kind == "allocation":
            alloc = load_allocation(self.audit.allocation)
            a = self.audit
            for g in self.mpl_geolevels:
                names = [q.query for q in alloc.select(a.universe, a.region, g)]
                if m.query not in names:
                    raise ValueError(
                        f"mpl.query = {m.query!r} is not measured at {g}; allowed: {', '.join(names)}"
                    )
        if m.count == 0 and "remove" in m.pairs:
            raise ValueError("mpl.count = 0 leaves nobody to remove; drop 'remove' from mpl.pairs")
        if self.release.kind == "allocation":
            self._mpl_schema()
        return self

    def _mpl_schema(self) -> None:
        """MPL tests one released count per geolevel: ``mpl.query``, else the geolevel's least
        noisy query (largest ρ_q). Over a production schema (``population.attributes``) that query
        must be one of the schema's: a schema of another product is refused, naming both."""
        from auditlib.geography.schema import schema

        attr = self.population.attributes
        if not attr.endswith("_production"):
            return
        sch, a = schema(attr), self.audit
        alloc = load_allocation(a.allocation)
        for g in self.mpl_geolevels:
            qs = alloc.select(a.universe, a.region, g)
            qb = max(qs, key=lambda q: q.rho)
            qb = next((q for q in qs if q.query == self.mpl.query), qb)
            tested, cells = qb.query, qb.n_cells
            if not sch.has_query(tested) or sch.n_query_cells(tested) != cells:
                raise ValueError(
                    f"population.attributes = {attr!r} has no query {tested!r} of {cells:,} "
                    f"cells, which MPL tests at {g} (allocation {a.allocation!r}): the "
                    "allocation is not over that "
                    "schema; set population.attributes to its schema ('pl94_production' for a "
                    "PL94-171 allocation, 'dhc_production' for a DHC one) or to 'total'"
                )

    @property
    def mpl_geolevels(self) -> tuple[str, ...]:
        """The geolevels MPL tests (``mpl.geolevels``; "all": every level, GDPC: the leaves)."""
        g = self.mpl.geolevels
        if g == "all":
            return self.geolevels[-1:] if self.release.kind == "gdpc" else self.geolevels
        return tuple(g)

    @property
    def geolevels(self) -> tuple[str, ...]:
        p = self.population
        if p.kind == "table":
            return (TABLE_ROOT, *p.level_columns, p.unit or "unit")
        if self.release.kind in GEOMETRIC_RELEASES:
            return tuple(f"L{j}" for j in range(p.depth + 1))
        levels = load_allocation(self.audit.allocation).geolevels(
            self.audit.universe, self.audit.region
        )
        lowest = self.release.lowest_level
        if lowest in levels and p.kind == "spine" and self.release.kind == "topdown":
            return levels[: levels.index(lowest) + 1]  # the levels below it not simulated
        return levels

    @property
    def accounted_geolevels(self) -> tuple[str, ...]:
        """The geolevels whose exact accounting the audit stores: the simulated ones, or for an
        observed release every geolevel of the declared allocation."""
        if self.release.kind == "observed":
            return load_allocation(self.audit.allocation).geolevels(
                self.audit.universe, self.audit.region
            )
        return self.geolevels

    def fanout(self, geolevel: str) -> int:
        return self.population.fanout.get(geolevel, DEFAULT_FANOUT.get(geolevel, 2))

    def to_toml(self) -> str:
        return dump_toml(self.model_dump(mode="json"))
