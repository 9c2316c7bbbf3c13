"""The sections of an audit spec, each a strict pydantic model with its bounds: audit, population,
release, simulation, accounting, output (the epl section's in ``flows.spec.epl_section``, the mpl
section's in ``flows.spec.mpl_section``, the cluster's in ``flows.spec.cluster``)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictInt,
    field_validator,
    model_serializer,
    model_validator,
)

from auditlib.allocation_file import is_allocation_path
from auditlib.allocations import ALLOCATION_FILES, Allocation, load_allocation
from auditlib.geography.flaxman import MAX_PEOPLE
from flows.spec.meanings import describe_schema

#: fan-out (children per parent) used for a geolevel the spec does not name
DEFAULT_FANOUT: dict[str, int] = {
    "County": 3,
    "Prim": 1,
    "Tract_Subset_Group": 2,
    "Tract_Subset": 3,
    "Tract": 6,
    "Block_Group": 3,
    "Block": 8,
}


#: Flaxman's geometric releases (population.kind = "flaxman"); the others use the allocation
GEOMETRIC_RELEASES = ("gdpc", "rdpc", "adpc")


#: population keys of the synthetic hierarchy, refused with population.kind = "spine"
SYNTHETIC_ONLY = (
    "states",
    "fanout",
    "mean_block_population",
    "empty_block_share",
    "cell_concentration",
)


#: release kinds each population kind supports
RELEASES_OF = {
    "synthetic": ("allocation", "topdown"),
    "spine": ("topdown",),
    "flaxman": GEOMETRIC_RELEASES,
    "table": (*GEOMETRIC_RELEASES, "sa3", "sa4", "topdown", "observed", "published"),
}

#: release kinds running TopDown on a table's hierarchy: of true counts, or of published ones
TABLE_TOPDOWN_RELEASES = ("topdown", "published")

#: release keys of a published release beside its truth, refused with other release kinds
OBSERVED_ONLY = ("published", "published_files")


#: Flaxman & Petti's stratified releases of a table's rows (count columns = strata)
STRATIFIED_RELEASES = ("sa3", "sa4")


#: population keys of a table of real counts, refused with other population kinds
TABLE_ONLY = ("path", "counts", "unit")


#: name of a table population's root level (the sum of every row)
TABLE_ROOT = "All"


class Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_default=True, json_schema_extra=describe_schema
    )


class AuditSection(Strict):
    name: str = Field("audit", min_length=1, max_length=200)
    #: a shipped allocation id, or the path of an allocation file (.csv or .toml; relative to the
    #: spec file's directory); the simulation draws each query's own noise (discrete Gaussian,
    #: two-sided geometric, Laplace or Gaussian)
    allocation: str = Field("dhcp_20220825_paper", min_length=1)
    universe: str = "persons"
    region: str = "US"
    neighbours: Literal["add_remove", "bounded"] = "add_remove"
    replicates: Annotated[StrictInt, Field(gt=0, le=100_000)] = 4
    seed: Annotated[StrictInt, Field(ge=0, lt=2**63)] = 20200401
    #: labels of the run's Prefect flow runs, besides those derived from the spec (allocation,
    #: release, population, neighbours); they do not change the run id
    tags: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(
        default_factory=list, max_length=20
    )

    @model_validator(mode="after")
    def _allocation(self) -> AuditSection:
        """A shipped id, or an allocation file checked row by row: its relation is
        ``neighbours`` (a query's noise may be of any mechanism the file allows: the audit draws
        it)."""
        if self.allocation in ALLOCATION_FILES:
            return self
        if not is_allocation_path(self.allocation):
            raise ValueError(
                f"audit.allocation = {self.allocation!r} is unknown; allowed: "
                f"{', '.join(ALLOCATION_FILES)}, or the path of an allocation file (.csv or .toml)"
            )
        alloc = load_allocation(self.allocation)
        alloc.check_relation(self.neighbours)
        return self

    def check_scope(self, alloc: Allocation) -> None:
        """``universe`` and ``region`` are among those of ``alloc`` (this section's allocation)."""
        if self.universe not in alloc.universes():
            raise ValueError(
                f"audit.universe = {self.universe!r} is not in allocation {self.allocation!r}; "
                f"allowed: {', '.join(alloc.universes())}"
            )
        if self.region not in alloc.regions(self.universe):
            raise ValueError(
                f"audit.region = {self.region!r} is not in allocation {self.allocation!r}; "
                f"allowed: {', '.join(alloc.regions(self.universe))}"
            )


class PopulationSection(Strict):
    #: "synthetic": a TopDown-shaped hierarchy of the allocation's geolevels (``states``, ``fanout``);
    #: "flaxman": Flaxman's N people uniform over a regular J-level tree (``people``, ``levels``,
    #: ``mean_per_location``); "spine": the US spine with the real 2020 unit counts
    #: (``auditlib.geography.spine``; ``spine_states``), release.kind = "topdown" only
    #: "table": real counts from a CSV or Parquet file (``path``, ``counts``, ``levels``, ``unit``;
    #: ``auditlib.geography.tabular.read_counts``), release.kind = "gdpc" | "rdpc" | "adpc" |
    #: "sa3" | "sa4" | "topdown" (the table's hierarchy: root, ``levels`` columns, rows)
    kind: Literal["synthetic", "flaxman", "spine", "table"] = "synthetic"
    states: Annotated[StrictInt, Field(gt=0, le=52)] = 3
    fanout: dict[str, Annotated[StrictInt, Field(gt=0, le=10_000)]] = Field(default_factory=dict)
    mean_block_population: Annotated[float, Field(gt=0, le=1e6)] = 30.0
    empty_block_share: Annotated[float, Field(ge=0, lt=1)] = 0.2
    cell_concentration: Annotated[float, Field(gt=0, le=1e6)] = 0.5
    seed: Annotated[StrictInt, Field(ge=0, lt=2**63)] | None = None
    people: Annotated[StrictInt, Field(gt=0, le=MAX_PEOPLE)] = 100_000
    #: flaxman: J levels of the regular tree; table: the hierarchy columns, top to bottom
    levels: Annotated[StrictInt, Field(gt=0, le=12)] | list[str] = 3
    mean_per_location: Annotated[float, Field(gt=0)] = 100.0
    #: attribute schema (``auditlib.geography.schema``) of the block histograms of a ``release.kind = "topdown"`` run:
    #: "total" (one cell) | "pl94" (voting age × Hispanic × 7 races = 28 cells) |
    #: "pl94_production" (the Bureau's PL94-171 persons histogram: hhgq 8 × voting age × Hispanic ×
    #: cenrace 63 = 2,016 cells) | "dhc_production" (DHC persons: relgq 42 × sex × age 116 ×
    #: Hispanic × cenrace 63 = 1,227,744 cells); the production schemas run on kind = "spine" only,
    #: as sparse histograms with group-quarters invariants, storing the query cells non-zero in
    #: the truth or a replicate's release (docs/simulation.md, "Production schemas in an audit")
    attributes: Literal["total", "pl94", "pl94_production", "dhc_production"] = "total"
    #: kind = "spine": the states to run, "all", a count (the first n) or labels "ST01".."ST51"
    #: (region "US") / "PR" (region "PR")
    spine_states: Literal["all"] | StrictInt | list[str] = "all"
    #: kind = "table": the CSV / Parquet file (relative: to the spec file's directory, or to the
    #: working directory for a spec given as data), its count columns and its unit column
    path: str = ""
    counts: list[str] = Field(default_factory=list)
    unit: str = ""

    @model_validator(mode="before")
    @classmethod
    def _table_levels(cls, data: Any) -> Any:
        # a table without hierarchy columns: its rows hang from the root
        if isinstance(data, dict) and data.get("kind") == "table" and "levels" not in data:
            return {**data, "levels": []}
        return data

    def changed(self, keys: tuple[str, ...]) -> list[str]:
        """Those of ``keys`` whose value is not the default (a spec written back out sets them all)."""
        default = PopulationSection()
        return [k for k in keys if getattr(self, k) != getattr(default, k)]

    def refuse_synthetic_settings(self, own: str) -> None:
        """Refuse a setting of the synthetic hierarchy for a population that has its ``own`` units
        (``"a table has its own units and counts"``)."""
        given = self.changed(SYNTHETIC_ONLY)
        if given:
            raise ValueError(
                f"population.{given[0]} is a setting of the synthetic hierarchy; {own}: drop it, "
                'or use population.kind = "synthetic"'
            )

    @field_validator("path")
    @classmethod
    def _absolute(cls, v: str) -> str:
        # resolved once, here: workers may run in another directory
        return str(Path(v).expanduser().resolve()) if v else v

    @property
    def depth(self) -> int:
        """flaxman: J, the levels of the regular tree below the root (``levels``)."""
        if isinstance(self.levels, list):
            raise ValueError("population.levels is a list of columns: a table population")
        return self.levels

    @property
    def level_columns(self) -> tuple[str, ...]:
        """table: the hierarchy columns (``levels``; none when it is left unset)."""
        return tuple(self.levels) if isinstance(self.levels, list) else ()

    @field_validator("spine_states", mode="before")
    @classmethod
    def _spine_states(cls, v: Any) -> Any:
        if isinstance(v, bool) or (isinstance(v, str) and v != "all"):
            raise ValueError('use "all", a count of states, or a list of labels such as ["ST01"]')
        if isinstance(v, int) and v < 1:
            raise ValueError('need a count >= 1, a list of labels such as ["ST01"], or "all"')
        return v


class ReleaseSection(Strict):
    #: "allocation": discrete Gaussian noise on every query of the allocation at every geounit
    #: (the noisy measurements of TopDown); "gdpc" / "rdpc" / "adpc": Flaxman's geometric
    #: releases of total counts (needs population.kind = "flaxman"); "topdown": the allocation's
    #: noisy measurements post-processed top-down to non-negative, consistent integer histograms
    #: (``population.attributes``), state totals invariant
    #: "sa3" / "sa4": Flaxman & Petti's stratified releases of a table's rows (population.kind = "table"):
    #: G(epsilon) on each row's total and G(epsilon_strata) on each count, made L1-consistent; or
    #: G(epsilon) on each count, the totals of the last levels column invariant
    #: "observed": no simulation; published DP counts beside the table's true counts
    #: (population.kind = "table"; ``published`` or ``published_files``), audited as released
    #: "published": the table holds published TopDown counts (population.kind = "table"); error
    #: bars for each of them and for ``areas``: audit.replicates further TopDown runs of the
    #: allocation from the published counts (the approximate Monte Carlo, docs/published_error_bars.md)
    kind: Literal[
        "allocation", "gdpc", "rdpc", "adpc", "topdown", "sa3", "sa4", "observed", "published"
    ] = "allocation"
    epsilon: Annotated[float, Field(gt=0, le=100)] = 0.1
    epsilon_strata: Annotated[float, Field(gt=0, le=100)] | None = None
    n_runs: Annotated[StrictInt, Field(gt=0, le=1000)] = 4  # P of ADPC
    #: topdown: stopping step of the multi-query least-squares solver, in people per cell
    tolerance: Annotated[float, Field(gt=0, le=1)] = 1e-3
    #: topdown on population.kind = "table": the file level ("All", a population.levels column or
    #: the unit column) each of the allocation's geolevels is measured at, e.g.
    #: {State = "All", County = "county", Block = "tract"}; "" leaves a geolevel unsimulated.
    #: Every geolevel of the allocation is named (those that are file levels may be left out)
    #: and every file level gets exactly one, in the same top-down order. observed: the
    #: declared geolevel measured at the table's rows, e.g. {County = "county"} (default: the
    #: allocation's last geolevel; the levels above the rows are sums, measured at none)
    levels: dict[str, str] = Field(default_factory=dict)
    #: topdown on population.kind = "spine": the lowest geolevel simulated ("": the allocation's
    #: last). A level's TopDown release depends only on the levels above it, so the levels kept
    #: are released exactly as in the whole run; the composed accounting is still the whole
    #: allocation's, the per-level accounting the simulated levels'
    lowest_level: str = ""
    #: observed: per published run, its columns of population.path, one per count column in order
    #: (e.g. [["persons_dp1"], ["persons_dp2"]])
    published: list[list[str]] = Field(default_factory=list)
    #: observed: one CSV / Parquet file per run (relative: as population.path), with the table's
    #: levels and unit columns and the run's published counts under the count columns' names
    published_files: list[str] = Field(default_factory=list)
    #: observed: the mechanism publishes whole numbers (discrete Gaussian, geometric): a fractional
    #: published count is refused; false for real-valued noise (Laplace, Gaussian)
    published_integer: bool = True
    #: observed: the post-processing the declaration says the published counts went through:
    #: "none" (each residual is a draw of the declared noise) or "topdown" (the declared
    #: allocation's noisy measurements post-processed top-down, as release.kind = "topdown"
    #: does, e.g. the Census Bureau's counts): population.attributes then names the schema,
    #: release.levels maps the allocation's geolevels onto every level of the table as for a
    #: TopDown release, and each level's residuals are tested against dpaudit's own TopDown of
    #: the declared allocation on the same true counts, never against the raw noise
    post_processing: Literal["none", "topdown"] = "none"
    #: observed, post_processing = "topdown": the runs of dpaudit's TopDown drawn as reference
    reference_runs: Annotated[StrictInt, Field(ge=10, le=10_000)] = 100
    #: published: a CSV file mapping the table's units to areas (e.g. blocks to districts): a
    #: column named as population.unit and one named "area" (relative: as population.path)
    areas: str = ""
    #: published: the intervals' level is 1 - alpha (0.1: 90 % intervals)
    alpha: float = 0.1
    #: published: the schema's queries whose cells get error bars (empty: every query)
    queries: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _published_keys(self) -> ReleaseSection:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"release.alpha = {self.alpha!r} is not in (0, 1); e.g. 0.1: 90 %")
        if self.kind != "published" and (self.areas or self.alpha != 0.1 or self.queries):
            key = "areas" if self.areas else "alpha" if self.alpha != 0.1 else "queries"
            raise ValueError(
                f"release.{key} is a setting of error bars of "
                'published counts; drop it or set release.kind = "published"'
            )
        return self

    @model_serializer(mode="wrap")
    def _leave_out_unset_lowest_level(self, handler: SerializerFunctionWrapHandler) -> Any:
        # unset, it is not written: a spec dumps (and its run id hashes) as before the key was
        data = handler(self)
        if not self.lowest_level and isinstance(data, dict):
            data.pop("lowest_level", None)
        return data

    @field_validator("published_files")
    @classmethod
    def _absolute_files(cls, v: list[str]) -> list[str]:
        # resolved once, here, as population.path: workers may run in another directory
        return [str(Path(f).expanduser().resolve()) for f in v]


def _named_some(v: Any, example: str) -> Any:
    """A list of names that is not empty and names each once ("all" passes)."""
    if isinstance(v, list):
        if not v:
            raise ValueError(
                f'is empty: a run of nothing; name at least one {example}, or use "all"'
            )
        if len(set(v)) != len(v):
            raise ValueError("names an entry twice; name each once")
    return v


class SimulationSection(Strict):
    queries: Literal["all"] | list[str] = "all"
    max_cells_per_query: Annotated[StrictInt, Field(gt=0, le=10_000_000)] = 16
    postprocess: Literal["none", "nonnegative"] = "none"

    @field_validator("queries")
    @classmethod
    def _some_queries(cls, v: Any) -> Any:
        return _named_some(v, 'query, e.g. ["total"]')


def _check_delta(d: float) -> float:
    if not (math.isfinite(d) and 1e-20 <= d < 1):
        raise ValueError(f"delta {d!r} is outside [1e-20, 1); use values such as 1e-10")
    return d


class AccountingSection(Strict):
    deltas: list[float] = Field(default_factory=lambda: [1e-5, 1e-10, 1e-11], min_length=1)
    #: the one δ of every headline number (the report's first screen, ``dpaudit run``'s table);
    #: always among the accounted ``deltas`` (added when missing). The Bureau's: 1e-10
    headline_delta: float = 1e-10
    composed: bool = True
    eps_grid_points: Annotated[StrictInt, Field(ge=10, le=5000)] = 200
    #: familywise error rate of the claim verdict: a true claim is refuted at any level with
    #: probability at most this (Bonferroni over the tests; docs/epl.md#the-claim-verdict)
    claim_alpha: Annotated[float, Field(gt=0.0, le=0.2)] = 0.05
    #: reuse stored exact accounting results (``$DPAUDIT_CACHE_DIR``, else the user's cache
    #: directory; keyed by the allocation, relation, grids and code version: docs/accounting.md)
    cache: bool = True

    @field_validator("deltas")
    @classmethod
    def _deltas(cls, v: list[float]) -> list[float]:
        return sorted({_check_delta(d) for d in v}, reverse=True)

    @field_validator("headline_delta")
    @classmethod
    def _headline(cls, v: float) -> float:
        return _check_delta(v)

    @model_validator(mode="after")
    def _headline_accounted(self) -> AccountingSection:
        if self.headline_delta not in self.deltas:  # frozen: set once, while validating
            object.__setattr__(
                self, "deltas", sorted({*self.deltas, self.headline_delta}, reverse=True)
            )
        return self


class OutputSection(Strict):
    store: str = Field("results/audit.zarr", min_length=1)
    report: str = Field("results/report.html", min_length=1)
    overwrite: bool = False
    #: the http(s) URL of the directory the report is served from (e.g. "http://127.0.0.1:8000/",
    #: with `python3 -m http.server 8000 --directory results` running): the Prefect artifact links
    #: the report there (its file name appended). Unset: the artifact gives the report's path and
    #: how to open it (a browser does not follow a file:// link from a web page)
    report_url: str = ""

    @field_validator("report_url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if v and not re.match(r"^https?://[^/\s]+(/\S*)?$", v):
            raise ValueError(
                f'{v!r} is not an http(s) URL of a directory; give e.g. "http://127.0.0.1:8000/" '
                "(where the report's directory is served), or leave it unset"
            )
        return v
