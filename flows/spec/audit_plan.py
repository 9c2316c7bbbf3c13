"""The plan of an audit: its regions (states × geolevels), queries, blocks and release kind.

An :class:`AuditPlan` is made from the spec alone by ``flows.spec.plan.make_plan``; the flow, its
tasks and the report read it. The ``*Params`` classes hold what one population or release kind
needs beyond the common fields."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from auditlib.geography import PopulationParams, SyntheticHierarchy
from auditlib.simulate import QueryPlan
from flows.releases import AllocationRelease, Release


@dataclass(frozen=True)
class Block:
    """One unit of simulation work: a (state, level) region of the residual store."""

    state: int  # index in AuditPlan.states (0 = the nation when there is a US level)
    level: int  # index in AuditPlan.geolevels
    state_key: int  # 0 = nation, 1..n = states
    label: str  # e.g. "ST02/County"
    n_items: int


@dataclass(frozen=True)
class FlaxmanParams:
    """Flaxman's setting: N people over a regular J-level tree, a geometric release at ε."""

    people: int
    levels: int
    mean_per_location: float
    epsilon: float
    n_runs: int
    seed: int


@dataclass(frozen=True)
class TopDownParams:
    """A TopDown-style release: schema, measured (schema query, σ²) by level name, tolerance."""

    schema: str
    measured: dict[str, tuple[tuple[str, float], ...]]  # geolevel name -> its measurements
    tol: float


@dataclass(frozen=True)
class ProductionParams:
    """TopDown on a production schema's sparse histograms (``flows.audit.production``): a block's items
    are the query cells non-zero in the truth or a replicate's release
    (``auditlib.simulate.sparse_release``), so a block's ``n_items`` is its capacity, not its
    count; ``units[state][level]``: the block's geounits (its query ``q`` has ``units × n_q``
    cells, those not stored zero in the truth and in every replicate); ``fit_processes``: the
    processes a state's task solves its fits' parts in (``cluster.fit_processes``; the same
    release with any number)."""

    schema: str
    units: tuple[tuple[int, ...], ...]
    fit_processes: int = 1


@dataclass(frozen=True)
class SpineParams:
    """The US spine a plan runs on: generated from ``seed`` for ``region``; a state's ``state_key``
    is its spine index + 1."""

    seed: int
    region: str
    #: the name it is published under on the run's Dask cluster (``flows.audit.spine_share``); "": none
    shared: str = ""


@dataclass(frozen=True)
class TableParams:
    """A table of real counts (``read_counts``): file, count columns, hierarchy columns, unit
    column; a Flaxman 2019 release (``AuditPlan.release``) of the rows' totals at ε."""

    path: str
    counts: tuple[str, ...]
    levels: tuple[str, ...]
    unit: str
    epsilon: float
    n_runs: int
    epsilon_strata: float | None = None  # sa3: ε₂ of the counts (None: epsilon)
    #: observed: ``flows.spec.sources.load_observed``'s arguments (published runs read, not drawn)
    observed: tuple[Any, ...] | None = None
    #: the schema the count columns are the cells of ("": one attribute, the columns its levels)
    attributes: str = ""


@dataclass(frozen=True)
class TableHierarchyParams:
    """A table's hierarchy under a TopDown release (one run, the root's total invariant): file,
    count columns (the schema's cells), hierarchy columns, unit column, and the allocation
    geolevel measured at each of the plan's geolevels (the table's levels)."""

    path: str
    counts: tuple[str, ...]
    levels: tuple[str, ...]
    unit: str
    attributes: str
    measured_as: tuple[str, ...]


@dataclass(frozen=True)
class AuditPlan:
    states: tuple[str, ...]
    geolevels: tuple[str, ...]
    queries: tuple[str, ...]
    level_queries: tuple[tuple[tuple[int, QueryPlan], ...], ...]  # per geolevel
    hierarchy: SyntheticHierarchy
    population: PopulationParams
    blocks: tuple[Block, ...]  # the blocks with data
    empty: tuple[tuple[int, int], ...]  # (state, level) regions without data
    replicates: int
    noise_seed: int
    postprocess: str
    release: str = "allocation"  # or "gdpc" | "rdpc" | "adpc" (Flaxman 2019, needs ``flaxman``)
    flaxman: FlaxmanParams | None = None
    topdown: TopDownParams | None = None  # release "topdown"
    spine: SpineParams | None = None  # population "spine"
    table: TableParams | None = None  # population "table", Flaxman 2019 / 003 releases
    table_hierarchy: TableHierarchyParams | None = None  # population "table", release "topdown"
    production: ProductionParams | None = None  # spine TopDown on a production schema (sparse)
    #: the release kind, chosen once by :func:`make_plan`: what is computed and how
    strategy: Release = field(default_factory=AllocationRelease)
    #: the spec's allocation where the plan loaded it (None: not loaded); not sent to the tasks
    allocation: Any = field(default=None, compare=False, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        """The plan as pickled for a task: without its loaded allocation (read where it is made)."""
        return {k: v for k, v in self.__dict__.items() if k != "allocation"}

    @property
    def topdown_top(self) -> int:
        """The level (index in ``geolevels``) of the top of each TopDown run: the table's root, else
        State."""
        return self.strategy.top_geolevel(self)

    @property
    def geometric(self) -> bool:
        """A release of a tree of total counts (Flaxman's GDPC/RDPC/ADPC, Flaxman & Petti's, a published
        table's): its residuals are not the allocation's simulated noise."""
        return self.strategy.geometric

    def blocks_at(self, level: int) -> tuple[Block, ...]:
        return tuple(b for b in self.blocks if b.level == level)

    def sigma2_matrix(self) -> np.ndarray:
        """σ² of every (geolevel, query) the plan measures; NaN where a level has no such query."""
        sigma2 = np.full((len(self.geolevels), len(self.queries)), np.nan)
        for gi, lq in enumerate(self.level_queries):
            for qid, q in lq:
                sigma2[gi, qid] = q.sigma2
        return sigma2

    def block_items(self) -> np.ndarray:
        """(state, level) items of every block with data (0: a region without data)."""
        n = np.zeros((len(self.states), len(self.geolevels)), dtype=np.int64)
        for b in self.blocks:
            n[b.state, b.level] = b.n_items
        return n

    def template_layout(self) -> dict[str, Any]:
        """The residual store's layout for this plan: the keywords of
        ``ResultStore.create_residual_template`` (``storage/result_store.py``) other than
        ``attrs``."""
        return {
            "states": self.states,
            "geolevels": self.geolevels,
            "replicates": self.replicates,
            "n_items": self.block_items(),
            "queries": self.queries,
            "sigma2": self.sigma2_matrix(),
        }
