"""TopDown on the production schemas (``population.attributes = "pl94_production" |
"dhc_production"``): what the spec may combine them with, and how large a dense block may grow."""

from __future__ import annotations

from typing import Any

#: attribute schemas whose TopDown runs on sparse histograms (``auditlib.simulate.sparse_topdown``)
PRODUCTION_SCHEMAS = ("pl94_production", "dhc_production")

#: most bytes a dense production block may take (residuals of every replicate and the four item
#: variables of every cell of its units: the task that simulates it holds them all). A sparse
#: block (on the spine) is not bounded here: its capacity only reserves room on the store's item
#: axis, and it is written and verified in pieces of its own items (``storage/residuals.py``)
MAX_BLOCK_BYTES = 2 << 30


def production_combination(population_kind: str, release_kind: str, attributes: str) -> None:
    """``ValueError`` naming the fix unless a production schema runs where it can: the noisy
    measurements (``release.kind = "allocation"``) of synthetic or spine histograms, and TopDown —
    sparse on the spine (its histograms and group-quarters invariants are drawn for spine blocks),
    dense on a synthetic population for ``pl94_production`` only (2,016 cells per unit)."""
    if attributes not in PRODUCTION_SCHEMAS:
        return
    if release_kind not in ("allocation", "topdown"):
        raise ValueError(
            f"population.attributes = {attributes!r} is the schema of the histograms of an "
            f"allocation or TopDown release; release.kind = {release_kind!r} does not use it: set "
            'release.kind = "topdown" (with population.kind = "spine"), or drop '
            "population.attributes"
        )
    if population_kind not in ("spine", "synthetic"):
        raise ValueError(
            f"population.attributes = {attributes!r} runs on the US spine's blocks (sparse "
            "histograms with their group-quarters invariants) or a synthetic population, not on "
            f'population.kind = {population_kind!r}: set population.kind = "spine" with '
            'spine_states, or use attributes = "total" or "pl94"'
        )
    if release_kind == "topdown" and population_kind != "spine" and attributes == "dhc_production":
        raise ValueError(
            f"release.kind = 'topdown' with population.attributes = {attributes!r} runs on the US "
            f"spine's sparse histograms only, not on population.kind = {population_kind!r} (dense "
            '1,227,744-cell histograms): set population.kind = "spine" with spine_states, or '
            "set release.kind = 'allocation'"
        )


def check_dense_blocks(plan: Any, attributes: str, release_kind: str, max_cells: int) -> None:
    """``ValueError`` naming the largest block and the fix when a production schema's dense run
    (a synthetic population: every unit holds every simulated cell of its level's queries) has a
    block whose place on the item axis exceeds :data:`MAX_BLOCK_BYTES`; ``plan``: its AuditPlan,
    ``max_cells``: ``simulation.max_cells_per_query``."""
    if not plan.blocks:
        return
    b = max(plan.blocks, key=lambda b: b.n_items)
    size = b.n_items * (4 * plan.replicates + 14)
    if size <= MAX_BLOCK_BYTES:
        return
    cells = sum(q.n_sim for _, q in plan.level_queries[b.level])
    fix = (
        f"lower simulation.max_cells_per_query (now {max_cells:,}), population.fanout or "
        "audit.replicates"
        if release_kind == "allocation"
        else "lower population.fanout or audit.replicates"
    )
    raise ValueError(
        f"population.attributes = {attributes!r} with release.kind = {release_kind!r} on a "
        f"synthetic population is dense: block {b.label} holds {b.n_items // max(cells, 1):,} "
        f"units × {cells:,} query cells = {b.n_items:,} cells, {size / 2**30:.1f} GiB for its "
        f"{plan.replicates} replicate(s) to write at once (at most "
        f"{MAX_BLOCK_BYTES / 2**30:g} GiB); {fix}"
    )
