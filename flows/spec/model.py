"""The audit spec: a TOML file validated by pydantic.

Unknown keys are rejected; every error names the field, the bad value and what is allowed. A default
spec ships with the package (``flows/spec/default_spec.toml``); ``dpaudit spec`` prints it.
"""

from __future__ import annotations

import json
import math
import tomllib
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from auditlib.allocations import ALLOCATION_FILES, load_allocation
from auditlib.epl.settings import BiasAwareSettings
from auditlib.exceptions import SpecError

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


#: seed 001's geometric releases (population.kind = "flaxman"); the others use the allocation
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
    "table": (*GEOMETRIC_RELEASES, "sa3", "sa4"),
}

#: seed 003's stratified releases of a table's rows (count columns = strata)
STRATIFIED_RELEASES = ("sa3", "sa4")

#: population keys of a table of real counts, refused with other population kinds
TABLE_ONLY = ("path", "counts", "unit")

#: name of a table population's root level (the sum of every row)
TABLE_ROOT = "All"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class AuditSection(_Strict):
    name: str = Field("audit", min_length=1, max_length=200)
    allocation: Literal[tuple(ALLOCATION_FILES)] = "dhcp_20220825_paper"  # type: ignore[valid-type]
    universe: str = "persons"
    region: str = "US"
    neighbours: Literal["add_remove", "bounded"] = "add_remove"
    replicates: Annotated[int, Field(gt=0, le=100_000)] = 4
    seed: Annotated[int, Field(ge=0, lt=2**63)] = 20200401


class PopulationSection(_Strict):
    #: "synthetic": a TopDown-shaped hierarchy of the allocation's geolevels (``states``, ``fanout``);
    #: "flaxman": seed 001's N people uniform over a regular J-level tree (``people``, ``levels``,
    #: ``mean_per_location``); "spine": the US spine with the real 2020 unit counts
    #: (``auditlib.geography.spine``; ``spine_states``), release.kind = "topdown" only
    #: "table": real counts from a CSV or Parquet file (``path``, ``counts``, ``levels``, ``unit``;
    #: ``auditlib.geography.tabular.read_counts``), release.kind = "gdpc" | "rdpc" | "adpc"
    kind: Literal["synthetic", "flaxman", "spine", "table"] = "synthetic"
    states: Annotated[int, Field(gt=0, le=52)] = 3
    fanout: dict[str, Annotated[int, Field(gt=0, le=10_000)]] = Field(default_factory=dict)
    mean_block_population: Annotated[float, Field(gt=0, le=1e6)] = 30.0
    empty_block_share: Annotated[float, Field(ge=0, lt=1)] = 0.2
    cell_concentration: Annotated[float, Field(gt=0, le=1e6)] = 0.5
    seed: Annotated[int, Field(ge=0, lt=2**63)] | None = None
    people: Annotated[int, Field(gt=0, le=10**9)] = 100_000
    #: flaxman: J levels of the regular tree; table: the hierarchy columns, top to bottom
    levels: Annotated[int, Field(gt=0, le=12)] | list[str] = 3
    mean_per_location: Annotated[float, Field(gt=0)] = 100.0
    #: attribute schema (``auditlib.geography.schema``) of the block histograms of a ``release.kind = "topdown"`` run:
    #: "total" (one cell) | "pl94" (voting age × Hispanic × 7 races = 28 cells)
    attributes: Literal["total", "pl94"] = "total"
    #: kind = "spine": the states to run, "all", a count (the first n) or labels "ST01".."ST51"
    #: (region "US") / "PR" (region "PR")
    spine_states: Literal["all"] | int | list[str] = "all"
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


class ReleaseSection(_Strict):
    #: "allocation": discrete Gaussian noise on every query of the allocation at every geounit
    #: (the noisy measurements of TopDown); "gdpc" / "rdpc" / "adpc": seed 001's geometric
    #: releases of total counts (needs population.kind = "flaxman"); "topdown": the allocation's
    #: noisy measurements post-processed top-down to non-negative, consistent integer histograms
    #: (``population.attributes``), state totals invariant
    #: "sa3" / "sa4": seed 003's stratified releases of a table's rows (population.kind = "table"):
    #: G(epsilon) on each row's total and G(epsilon_strata) on each count, made L1-consistent; or
    #: G(epsilon) on each count, the totals of the last levels column invariant
    kind: Literal["allocation", "gdpc", "rdpc", "adpc", "topdown", "sa3", "sa4"] = "allocation"
    epsilon: Annotated[float, Field(gt=0, le=100)] = 0.1
    epsilon_strata: Annotated[float, Field(gt=0, le=100)] | None = None
    n_runs: Annotated[int, Field(gt=0, le=1000)] = 4  # P of ADPC
    #: topdown: stopping step of the multi-query least-squares solver, in people per cell
    tolerance: Annotated[float, Field(gt=0, le=1)] = 1e-3


class SimulationSection(_Strict):
    queries: Literal["all"] | list[str] = "all"
    max_cells_per_query: Annotated[int, Field(gt=0, le=10_000_000)] = 16
    postprocess: Literal["none", "nonnegative"] = "none"


class EPLSection(_Strict):
    method: Literal["flaxman_petti"] = "flaxman_petti"
    bandwidth_factor: Annotated[float, Field(gt=0, le=100)] = 0.1
    percentiles: tuple[float, float] = (5.0, 95.0)
    range_multiplier: Annotated[float, Field(gt=0, le=100)] = 1.0
    # the bias-aware estimate (auditlib.epl.estimate_epl) and the EPL(x) surfaces
    bias_aware_bandwidth: Annotated[float, Field(gt=0, le=1e6)] | None = None
    bandwidth_kind: Literal["factor", "absolute", "scott", "silverman"] = "factor"
    bias_aware_percentiles: Literal["percentiles"] | tuple[float, float] = "percentiles"
    shift: Annotated[float, Field(gt=0, le=1000)] = 1.0
    n_boot: Annotated[int, Field(gt=0, le=100_000)] = 200
    confidence: Annotated[float, Field(gt=0, lt=1)] = 0.9
    ci_kind: Literal["basic", "percentile"] = "basic"
    n_null: Annotated[int, Field(gt=0, le=100_000)] = 100
    null_quantile: Annotated[float, Field(gt=0, lt=1)] = 0.95

    @field_validator("percentiles")
    @classmethod
    def _window(cls, v: tuple[float, float]) -> tuple[float, float]:
        lo, hi = v
        if not (0 <= lo < hi <= 100):
            raise ValueError("must satisfy 0 <= lower < upper <= 100")
        return v

    @field_validator("bias_aware_percentiles", mode="before")
    @classmethod
    def _bias_aware_window(cls, v: Any) -> Any:
        if isinstance(v, str):
            if v != "percentiles":
                raise ValueError('use "percentiles" (the same window) or a pair such as [5, 95]')
            return v
        try:
            lo, hi = (float(p) for p in v)
        except (TypeError, ValueError):
            raise ValueError(
                'use "percentiles" (the same window) or a pair such as [5, 95]'
            ) from None
        if not (0 <= lo < hi <= 100):
            raise ValueError("must satisfy 0 <= lower < upper <= 100")
        return (lo, hi)

    @field_validator("bandwidth_kind")
    @classmethod
    def _bandwidth_value(cls, v: str, info: ValidationInfo) -> str:
        if "bias_aware_bandwidth" not in info.data:  # that key failed on its own
            return v
        h = info.data["bias_aware_bandwidth"]
        if v == "absolute" and h is None:
            raise ValueError(
                "needs epl.bias_aware_bandwidth, h in residual units (e.g. 3.0); set it"
            )
        if v in ("scott", "silverman") and h is not None:
            raise ValueError(
                f"is a rule that sets h from the data, so epl.bias_aware_bandwidth = {h!r} is "
                'not used; drop it, or use bandwidth_kind = "factor" to set h = value x sd'
            )
        return v

    def bias_aware_settings(self) -> BiasAwareSettings:
        """The bias-aware estimate's knobs, as :func:`flows.tasks.epl_geolevel` takes them."""
        p = self.bias_aware_percentiles
        return BiasAwareSettings(
            bandwidth=self.bias_aware_bandwidth,
            bandwidth_kind=self.bandwidth_kind,
            percentiles=None if p == "percentiles" else tuple(p),  # type: ignore[arg-type]
            range_multiplier=self.range_multiplier,
            shift=self.shift,
            n_boot=self.n_boot,
            confidence=self.confidence,
            ci_kind=self.ci_kind,
            n_null=self.n_null,
            null_quantile=self.null_quantile,
        )

    def store_attrs(self) -> dict[str, Any]:
        """Attributes of the ``epl`` group that describe the bias-aware estimate, its surfaces
        and ``kde_error``, with the knobs that produced them."""
        ba = self.bias_aware_settings()
        lo, hi = ba.window(self.percentiles)
        if self.bandwidth_kind == "factor":
            h = f"bandwidth {ba.bandwidth_value():g} sd"
        elif self.bandwidth_kind == "absolute":
            h = f"bandwidth {ba.bandwidth_value():g} (residual units)"
        else:
            h = f"bandwidth by {self.bandwidth_kind}'s rule"
        window = f"integer window {self.range_multiplier:g} x percentiles {lo:g}-{hi:g}"
        conf = f"{100 * self.confidence:g} % {self.ci_kind}"
        ratio = "log p(x)/p(x+1)" if self.shift == 1 else f"log p(x)/p(x+{self.shift:g})"
        return {
            "range_multiplier": self.range_multiplier,
            "bias_aware_settings": json.dumps(ba.to_dict(), sort_keys=True),
            "bias_aware": f"epl_bias_aware: {h}, {window}, shift {self.shift:g}; "
            f"epl_ci_low/high: {conf} bootstrap interval of it ({self.n_boot} resamples); "
            f"epl_null_upper: {100 * self.null_quantile:g} % quantile of the same estimator on "
            f"{self.n_null} draws of matched discrete-Gaussian noise (a small-sample reference, "
            "not a no-loss null); inv_sigma2_hat: slope of EPL(x), an estimate of 1/sigma^2 "
            "assuming Gaussian noise; bootstrap and reference draws keyed from the audit seed",
            "surface": f"surface*: the bias-aware EPL(x) = {ratio} at surface*_x with its "
            f"pointwise {conf} bootstrap band (multinomial on lattice counts, window and h "
            "fixed), per state and pooled; thinned to at most 101 points (ends and argmax kept)",
            "kde_error": "kde_error: bound on the relative error of every KDE behind a (geolevel, "
            "query)'s stored EPLs (pooled and per state, every bandwidth): 0 for lattice "
            "residuals (exact), the linear-binning bound for non-integer residuals binned on a "
            "fine lattice; NaN where nothing was estimated",
        }


class AccountingSection(_Strict):
    deltas: list[float] = Field(default_factory=lambda: [1e-5, 1e-10, 1e-11], min_length=1)
    composed: bool = True
    eps_grid_points: Annotated[int, Field(ge=10, le=5000)] = 200

    @field_validator("deltas")
    @classmethod
    def _deltas(cls, v: list[float]) -> list[float]:
        for d in v:
            if not (math.isfinite(d) and 1e-20 <= d < 1):
                raise ValueError(f"delta {d!r} is outside [1e-20, 1); use values such as 1e-10")
        return sorted(set(v), reverse=True)


MPLPair = Literal["add", "remove", "move"]


def _all_pairs() -> list[MPLPair]:
    return ["add", "remove", "move"]


class MPLSection(_Strict):
    #: maximum privacy loss (seed 002) of one released cell count per geolevel, D vs D′
    enabled: bool = False
    geolevels: Literal["all"] | list[str] = "all"
    query: str = ""  # "": each geolevel's least noisy query (largest rho_q)
    count: Annotated[int, Field(ge=0, le=10**9)] = 3  # the tested cell's true count in D
    pairs: list[MPLPair] = Field(default_factory=_all_pairs, min_length=1)
    n: Annotated[int, Field(ge=100, le=10**7)] = 20_000
    n_confidence: Annotated[int, Field(ge=100, le=10**7)] = 50_000
    alpha: Annotated[float, Field(gt=0, lt=1)] = 0.05
    tau: Annotated[float, Field(gt=0, lt=1)] = 1e-3
    radius_sd: Annotated[float, Field(gt=0, le=50)] = 2.0
    delta_epsilons: list[Annotated[float, Field(ge=0, le=50)]] = Field(
        default_factory=lambda: [0.0, 0.1, 0.5, 1.0], min_length=1
    )

    @field_validator("pairs")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("must not repeat a pair kind")
        return v


class OutputSection(_Strict):
    store: str = Field("results/audit.zarr", min_length=1)
    report: str = Field("results/report.html", min_length=1)
    overwrite: bool = False


class AdaptSection(_Strict):
    minimum: Annotated[int, Field(ge=0, le=100_000)] = 0
    maximum: Annotated[int, Field(gt=0, le=100_000)] = 1

    @model_validator(mode="after")
    def _order(self) -> AdaptSection:
        if self.minimum > self.maximum:
            raise ValueError(
                f"cluster.adapt minimum {self.minimum} exceeds maximum {self.maximum}; "
                "use minimum <= maximum"
            )
        return self


class ClusterSection(_Strict):
    #: where tasks run, one of: ``scheduler`` (an external ``dask scheduler``), ``class`` (a Dask
    #: cluster class by import path, e.g. ``dask_jobqueue.SLURMCluster``, built with ``kwargs``), or
    #: neither (a local cluster of ``n_workers`` processes). ``adapt`` scales a local or class cluster.
    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_default=True, validate_by_name=True,
        validate_by_alias=True, serialize_by_alias=True,
    )  # fmt: skip

    scheduler: str = ""
    cluster_class: str | None = Field(
        default=None, validation_alias="class", serialization_alias="class"
    )
    kwargs: dict[str, Any] | None = None
    adapt: AdaptSection | None = None
    n_workers: Annotated[int, Field(gt=0, le=1024)] = 2
    threads_per_worker: Annotated[int, Field(gt=0, le=256)] = 1
    memory_limit: str = "4GiB"
    timeout_s: Annotated[int, Field(gt=0)] = 3600
    tasks_per_worker: Annotated[int, Field(ge=0, le=1024)] = 2

    @field_validator("memory_limit")
    @classmethod
    def _memory(cls, v: str) -> str:
        from dask.utils import parse_bytes

        try:
            parse_bytes(v)
        except ValueError:
            raise ValueError("must be a size such as '4GiB' or '2000MB'") from None
        return v

    @field_validator("cluster_class")
    @classmethod
    def _class(cls, v: str | None) -> str | None:
        if v:
            import_cluster_class(v)  # raises ValueError naming the path and the fix
        return v or None

    @model_validator(mode="after")
    def _one_target(self) -> ClusterSection:
        if self.scheduler and (self.cluster_class or self.adapt):
            raise ValueError(
                f"cluster.scheduler = {self.scheduler!r} cannot be combined with cluster.class or "
                'cluster.adapt; set scheduler = "" to build the cluster here'
            )
        if self.kwargs and not self.cluster_class:
            raise ValueError(
                "cluster.kwargs is set but cluster.class is not; name the class "
                '(e.g. class = "dask_jobqueue.SLURMCluster") or drop kwargs'
            )
        if self.cluster_class and self.kwargs:
            check_cluster_kwargs(import_cluster_class(self.cluster_class), self.kwargs)
        return self


def import_cluster_class(path: str) -> type:
    """The Dask cluster class named by ``module.Class``; ``ValueError`` naming the fix otherwise."""
    import importlib
    import inspect

    module, _, name = path.rpartition(".")
    if not module or not name:
        raise ValueError("not an import path module.Class; use e.g. 'dask_jobqueue.SLURMCluster'")
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise ValueError(
            f"module {module!r} cannot be imported ({exc}); install the "
            "package that provides it (e.g. `pip install dask-jobqueue`)"
        ) from None
    cls = getattr(mod, name, None)
    from distributed.deploy.cluster import Cluster

    if not (inspect.isclass(cls) and issubclass(cls, Cluster)):
        raise ValueError(
            f"{name!r} in {module!r} is not a Dask cluster class (a subclass of "
            "distributed.deploy.Cluster); check the name"
        )
    return cls


def check_cluster_kwargs(cls: type, kwargs: dict[str, Any]) -> None:
    """Refuse keyword arguments the class cannot take (classes taking ``**kwargs`` pass them on:
    those are checked when the cluster starts)."""
    import inspect

    sig = inspect.signature(cls)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return
    unknown = sorted(set(kwargs) - set(sig.parameters))
    if unknown:
        allowed = ", ".join(p for p in sig.parameters if p != "self")
        raise ValueError(
            f"cluster.kwargs has unknown argument(s) {', '.join(unknown)} for {cls.__name__}; "
            f"allowed: {allowed}"
        )


def _defaults(cls: type[BaseModel]) -> Any:
    return lambda: cls()


class AuditSpec(_Strict):
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
        if a.universe not in alloc.universes():
            raise ValueError(
                f"audit.universe = {a.universe!r} is not in allocation {a.allocation!r}; "
                f"allowed: {', '.join(alloc.universes())}"
            )
        if a.region not in alloc.regions(a.universe):
            raise ValueError(
                f"audit.region = {a.region!r} is not in allocation {a.allocation!r}; "
                f"allowed: {', '.join(alloc.regions(a.universe))}"
            )
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
            from flows.spec.plan import topdown_measured

            try:
                topdown_measured(self)
            except Exception as exc:  # names the allocation, level and schema
                raise ValueError(
                    f"population.attributes = {self.population.attributes!r}: {exc}"
                ) from None
        if a.region == "PR" and kind != "spine" and self.population.states != 1:
            raise ValueError("population.states must be 1 for region 'PR' (Puerto Rico is one run)")
        return self

    def _check_table(self) -> None:
        from flows.spec.plan import load_table

        p = self.population
        given = p.changed(SYNTHETIC_ONLY)
        if given:
            raise ValueError(
                f"population.{given[0]} is a setting of the synthetic hierarchy; a table has its "
                'own units and counts: drop it, or use population.kind = "synthetic"'
            )
        if isinstance(p.levels, int):
            raise ValueError(
                f"population.levels = {p.levels!r}: a table names its hierarchy columns, "
                'e.g. levels = ["state"] (or [] for none)'
            )
        if not p.path:
            raise ValueError(
                'population.kind = "table" needs population.path (a CSV or Parquet file)'
            )
        if not p.counts:
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
            load_table(p.path, tuple(p.counts), p.level_columns, p.unit)
        except Exception as exc:  # read_counts names the file, column or row
            msg = str(exc)  # a missing file's message already names the path
            raise ValueError(
                msg if p.path in msg else f"population.path = {p.path!r}: {msg}"
            ) from None

    def _check_spine(self) -> None:
        from flows.spec.plan import spine_state_indices

        p = self.population
        given = p.changed(SYNTHETIC_ONLY)
        if given:
            raise ValueError(
                f"population.{given[0]} is a setting of the synthetic hierarchy; the spine has "
                'its own units and people: drop it, or use population.kind = "synthetic"'
            )
        spine_state_indices(self.audit.region, p.spine_states)  # names the bad state

    @model_validator(mode="after")
    def _mpl_settings(self) -> AuditSpec:
        m = self.mpl
        if not m.enabled:
            return self
        if self.population.kind == "table":
            raise ValueError(
                'mpl.enabled with population.kind = "table": MPL tests synthetic and seed 001 '
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
        return self

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
        return load_allocation(self.audit.allocation).geolevels(
            self.audit.universe, self.audit.region
        )

    def fanout(self, geolevel: str) -> int:
        return self.population.fanout.get(geolevel, DEFAULT_FANOUT.get(geolevel, 2))

    def to_toml(self) -> str:
        return dump_toml(self.model_dump(mode="json"))


def _format_error(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        typ = e["type"]
        value = e.get("input")
        if typ == "extra_forbidden":
            lines.append(
                f"{loc}: unknown key (value {value!r}); check its spelling in the spec reference"
            )
        elif typ == "literal_error":
            allowed = e.get("ctx", {}).get("expected", "")
            lines.append(f"{loc} = {value!r}: not allowed; allowed: {allowed}")
        elif loc:
            msg = e["msg"].removeprefix("Value error, ")
            lines.append(f"{loc} = {value!r}: {msg}")
        else:
            lines.append(e["msg"].removeprefix("Value error, "))
    return "; ".join(lines)


def parse_spec(data: dict[str, Any], origin: str = "spec") -> AuditSpec:
    try:
        return AuditSpec.model_validate(data)
    except ValidationError as err:
        raise SpecError(f"invalid {origin}: {_format_error(err)}") from None


def load_spec(path: str | Path | None = None) -> AuditSpec:
    """Read and validate a spec file (``None``: the default spec shipped with the package)."""
    if path is None:
        return parse_spec(tomllib.loads(default_spec_text()), "default spec")
    p = Path(path)
    if not p.is_file():
        raise SpecError(
            f"spec file not found: {str(p)!r}; pass a TOML file or omit it for defaults"
        )
    try:
        data = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"spec {str(p)!r} is not valid TOML: {exc}") from None
    pop = data.get("population")
    if isinstance(pop, dict) and isinstance(pop.get("path"), str) and pop["path"]:
        # a table's relative path is relative to the spec file's directory
        pop["path"] = str((p.parent / Path(pop["path"]).expanduser()).resolve())
    return parse_spec(data, f"spec {str(p)!r}")


def default_spec_text() -> str:
    return (files("flows.spec") / "default_spec.toml").read_text()


def dump_toml(data: dict[str, Any]) -> str:
    """Minimal TOML writer for the spec's shape (tables of scalars, lists and inline tables)."""

    def scalar(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return repr(v)
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(v, list | tuple):
            return "[" + ", ".join(scalar(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f'"{k}" = {scalar(x)}' for k, x in v.items()) + " }"
        raise TypeError(f"cannot write {type(v).__name__} to TOML")

    out = []
    for section, body in data.items():
        out.append(f"[{section}]")
        out.extend(f"{k} = {scalar(v)}" for k, v in body.items() if v is not None)
        out.append("")
    return "\n".join(out)
