"""The protocol of a release kind: how its blocks are computed, submitted and finished.

An :class:`~flows.spec.audit_plan.AuditPlan` holds one :class:`Release` (``plan.strategy``), chosen once
by ``flows.spec.plan.make_plan``; the flow, its tasks and the blocks ask it instead of testing
which kind a plan is. The plan's parameter slots (``plan.topdown``, ``plan.table``, ...) hold the
data a kind reads; the strategy says what is done with them.

Modules here import no module that imports ``flows.spec.audit_plan`` (the plan imports them): the
computations they call are imported inside the methods, from modules that need the plan's types
only for type checking.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

if TYPE_CHECKING:
    from auditlib.simulate import ResidualBlock
    from flows.spec import AuditSpec
    from flows.spec.audit_plan import AuditPlan, Block
    from storage.result_store import ResultStore

#: how a kind's simulation is submitted (``flows.audit.submit.SUBMITTERS``): batches of independent
#: blocks, TopDown states (a state's geolevels from one run, then the nation), sparse production
#: states
BATCHED_BLOCKS = "batched blocks"
TOPDOWN_STATES = "topdown states"
SPARSE_STATES = "sparse states"


@dataclass(frozen=True)
class Release:
    """A release kind. Class attributes say which stages apply; methods compute its blocks."""

    #: its residuals are the allocation's simulated noise (accuracy group, the allocation's id)
    simulates_allocation: ClassVar[bool] = True
    #: exact accounting of the declared allocation (and claims) applies
    accounted: ClassVar[bool] = True
    #: a release of a tree of total counts, not the allocation's simulated noise (Flaxman's
    #: GDPC/RDPC/ADPC, Flaxman & Petti's SA3/SA4, a published table's runs)
    geometric: ClassVar[bool] = False
    #: the composed EPL over the tree's paths leaf -> root is estimated
    composed_epl: ClassVar[bool] = False
    #: a published release: its levels' declared claims are tested against its rows
    published: ClassVar[bool] = False
    #: the EPL task sums the TopDown bias of unit totals by truth class
    topdown_bias: ClassVar[bool] = False
    #: the store's replicates are chunked in ranges of ``cluster.replicates_per_task``
    replicate_ranges: ClassVar[bool] = False
    #: how the simulation is submitted (one of the constants above)
    submission: ClassVar[str] = BATCHED_BLOCKS
    #: its states are US spine states (``plan.spine``)
    runs_on_spine: ClassVar[bool] = False

    @property
    def kind(self) -> str:
        """The spec's ``release.kind`` of the plans of this strategy ("gdpc", "topdown", ...)."""
        return "allocation"

    def simulate_block(self, plan: AuditPlan, block: Block) -> ResidualBlock:
        """Every replicate of one (state, geolevel) block of a batched kind."""
        raise ValueError(f"a {self.kind} release computes no single block")

    def leaf_maps(self, plan: AuditPlan, levels: list[int]) -> tuple[int, list[np.ndarray]]:
        """Leaves of the release's tree and, per level in ``levels``, each leaf's unit there."""
        raise ValueError(f"a {self.kind} release has no tree of counts")

    def direct_release(self, plan: AuditPlan) -> Any:
        """The mechanism a direct estimate (``auditlib.simulate.direct``) runs for a table's
        release of this kind."""
        raise ValueError(f"a {self.kind} release has no direct estimate on a table")

    def state_population(self, plan: AuditPlan, key: int) -> tuple[Any, np.ndarray]:
        """The hierarchy (``StateHierarchy``) and block histograms of state ``key`` of a TopDown
        release: the population one of its runs measures."""
        raise ValueError(f"a {self.kind} release runs no TopDown state")

    def run_levels(self, plan: AuditPlan) -> list[int]:
        """The level indices of one TopDown run, top first (the nation is a sum)."""
        raise ValueError(f"a {self.kind} release runs no TopDown state")

    def state_units(self, plan: AuditPlan, key: int) -> int:
        """Units of every level (blocks included) of state ``key`` of a TopDown release."""
        raise ValueError(f"a {self.kind} release runs no TopDown state")

    def top_geolevel(self, plan: AuditPlan) -> int:
        """The level (index in ``plan.geolevels``) of the top of each TopDown run."""
        return plan.geolevels.index("State")

    def measured_as(self, plan: AuditPlan, geolevel: str | None) -> str | None:
        """The allocation geolevel a plan's geolevel is accounted as (None: all composed)."""
        return geolevel

    def missing_units(self, plan: AuditPlan, state: int, level: int, unit_index: np.ndarray) -> int:
        """Units of a block left out of its items (true and released totals 0)."""
        return 0

    def composed_over(self, default: str) -> str:
        """How the sum over (geolevel, query) of the EPL composes the levels."""
        return default

    def published_columns(self, plan: AuditPlan) -> tuple[str, ...]:
        """The count columns a published release's runs give."""
        return ()

    def source(self, spec: AuditSpec, alloc: Any, label: str) -> str:
        """What produced the residuals (the store's ``allocation_source``): the allocation's
        simulated noise (``alloc``, ``label``: the spec's allocation and its path-free label)."""
        return allocation_source(alloc, label)

    def finish(self, store: ResultStore, plan: AuditPlan) -> None:
        """After every block is written: drop kept histograms, write the kind's own groups."""

    def stored_residuals(self, store: ResultStore, plan: AuditPlan) -> int:
        """Residuals the run stored."""
        return int(sum(b.n_items for b in plan.blocks) * plan.replicates)


def allocation_source(alloc: Any, label: str) -> str:
    """Where the allocation comes from: a shipped one's source; an allocation file's path-free
    label (its name and content digest)."""
    return str(alloc.source) if alloc.allocation_id == label else f"allocation file {label}"
