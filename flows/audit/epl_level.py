"""The EPL of one geolevel in pieces: each state's block read once and reduced to its rows, its
per-query lattice histograms and its TopDown total-bias sums (:func:`epl_blocks`, any batch of the
level's blocks), then the pieces combined into the level's result (:func:`combine_level`).

The numbers are those of one pass over the level's blocks in plan order: every query's lattice is
fixed from the first block that measures it (:func:`level_spacings`, from the same sample, so a
batch needs no other batch's result), each state's rows are seeded by its state, and the combine
merges the histograms and adds the bias sums in the level's block order, whatever the batches and
the order they finish in. Only histograms and rows travel between the pieces and the combine; a
block's replicates are read in ranges of rows (:func:`read_rows`, the same counts as the block
read whole), so a piece holds at most :data:`READ_ELEMENTS` of its residuals whatever the
replicates. :func:`epl_geolevel` is the whole level in one call, as one batch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from auditlib import seeds
from auditlib.epl import (
    BiasAwareSettings,
    EPLKnobs,
    LatticeHistogram,
    epl_rows,
    histograms_by_query,
    lattice_spacing,
)
from auditlib.epl.stream import STEP_ELEMENTS as _STEP
from auditlib.simulate.topdown_residuals import TRUTH_CLASSES, total_bias_sums
from flows.spec.audit_plan import AuditPlan, Block
from storage.result_store import ResultStore

#: most residuals (replicates × items) of a block an EPL piece reads at once (:func:`read_rows`)
READ_ELEMENTS = 1 << 25
#: residuals ``histograms_by_query`` counts in one step (its own default)
STEP_ELEMENTS = _STEP

#: residuals of a query sampled (from the first block that has it) to choose its lattice
SPACING_SAMPLE = 1 << 16


def smallest_factor(
    bandwidth_factor: float, ba: BiasAwareSettings, replicates: int, blocks: Sequence[Block]
) -> float:
    """The smallest h/sd of the level's estimates: Flaxman–Petti's factor, the bias-aware one
    (for a rule, at the most residuals a query can have: every item of every state's block)."""
    n = max(1, replicates * sum(b.n_items for b in blocks))
    ratio = ba.smallest_factor(n)
    return bandwidth_factor if ratio is None else min(bandwidth_factor, ratio)


def choose_spacings(
    residual: np.ndarray,
    query_index: np.ndarray,
    spacings: list[float | None],
    factor: float,
    bias_aware: BiasAwareSettings | None = None,
) -> None:
    """Fix each query's lattice (1 for integer residuals) from the first block that measures it,
    so that every state's histogram of a query is on one lattice and they add. The lattice is
    fine enough for h = ``factor`` × sd and, with an absolute bias-aware bandwidth, for that h.
    ``residual`` may be the block's first rows only: each query's sample is its first
    ``sample_rows`` rows."""
    absolute = bias_aware is not None and bias_aware.bandwidth_kind == "absolute"
    for q, s in enumerate(spacings):
        if s is not None:
            continue
        cols = np.flatnonzero(query_index == q)
        if cols.size:
            sample = residual[: sample_rows(cols.size), cols]
            spacings[q] = lattice_spacing(sample, factor)
            if absolute and bias_aware is not None:
                spacings[q] = min(
                    spacings[q] or 1.0,
                    lattice_spacing(sample, bandwidth=bias_aware.bandwidth_value()),
                )


def read_rows(n_items: int) -> int:
    """Replicates of a block of ``n_items`` items its EPL piece reads at once: whole steps of
    ``histograms_by_query`` (so its histograms count the rows in the same order as from the block
    read whole), at most :data:`READ_ELEMENTS` residuals but for one step; a block's piece then
    holds a bounded part of it whatever the replicates (a state's Block level at a hundred
    replicates is ~10⁹ residuals)."""
    step = max(1, STEP_ELEMENTS // max(n_items, 1))
    return step * max(1, READ_ELEMENTS // (step * max(n_items, 1)))


def sample_rows(n_cols: int) -> int:
    """Replicates of a query's residuals sampled for its lattice, when a block has ``n_cols``
    items of it."""
    return max(1, SPACING_SAMPLE // n_cols)


def level_spacings(
    store: ResultStore,
    plan: AuditPlan,
    level: int,
    factor: float,
    bias_aware: BiasAwareSettings | None,
    needed: set[int],
) -> list[float | None]:
    """The lattice of every query in ``needed`` (and of any other decided on the way), chosen as
    one pass over the level's blocks in plan order chooses it (:func:`choose_spacings`), reading
    each block's query index and only the first rows its samples take, until ``needed`` is
    decided."""
    spacings: list[float | None] = [None] * len(plan.queries)
    for b in plan.blocks_at(level):
        if all(spacings[q] is not None for q in needed):
            break
        qi = store.read_query_index(b.state, b.level)
        open_q, counts = np.unique(qi, return_counts=True)
        todo = [int(c) for q, c in zip(open_q, counts, strict=True) if spacings[int(q)] is None]
        if not todo:
            continue
        r = store.read_residual_rows(b.state, b.level, max(map(sample_rows, todo)))
        choose_spacings(r, qi, spacings, factor, bias_aware)
    return spacings


def epl_blocks(
    store: ResultStore,
    plan: AuditPlan,
    level: int,
    blocks: Sequence[Block],
    knobs: EPLKnobs,
) -> list[dict[str, Any]]:
    """The pieces of a batch of one level's blocks (:func:`epl_block`, one after the other), on
    the level's lattices."""
    ba = knobs.bias_aware
    factor = smallest_factor(knobs.bandwidth_factor, ba, plan.replicates, plan.blocks_at(level))
    queries = [store.read_query_index(b.state, b.level) for b in blocks]
    needed = {int(q) for qi in queries for q in np.unique(qi)}
    spacings = level_spacings(store, plan, level, factor, ba, needed)
    return [epl_block(store, plan, level, b, spacings, knobs) for b in blocks]


def epl_block(
    store: ResultStore,
    plan: AuditPlan,
    level: int,
    block: Block,
    spacings: Sequence[float | None],
    knobs: EPLKnobs,
) -> dict[str, Any]:
    """One state's piece of a level's EPL: its rows (with the EPL(x) surface and its band, the
    bootstrap keyed by the audit's seed, the level and the state), its per-query histograms on
    ``spacings`` and, for a TopDown release, its unit totals' bias sums and counts by truth."""
    q = store.read_query_index(block.state, block.level)
    out: dict[str, Any] = {"state": block.state}
    bias = plan.strategy.topdown_bias
    if bias:
        truth, units = store.read_items(block.state, block.level)
        sums, counts = np.zeros(len(TRUTH_CLASSES)), np.zeros(len(TRUTH_CLASSES), np.int64)
    hists = None
    lattice = [s or 1.0 for s in spacings]
    rows = read_rows(q.size)
    for r0 in range(0, plan.replicates, rows):
        r = store.read_residual_rows(block.state, block.level, rows, start=r0)
        if bias:  # integer totals: their sums are exact whatever the ranges
            s, c = total_bias_sums(r, q, truth, units)
            sums, counts = sums + s, counts + np.asarray(c, dtype=np.int64)
        hists = histograms_by_query(
            r, q, len(plan.queries), lattice, step_elements=STEP_ELEMENTS, into=hists
        )
        del r
    if bias:
        # a sparse release's units left out: true and released totals 0
        counts[0] += plan.replicates * plan.strategy.missing_units(
            plan, block.state, block.level, units
        )
        out["bias"] = (sums, counts)
    assert hists is not None  # at least one replicate: checked when the spec is loaded
    seed = seeds.seed_sequence(plan.noise_seed, seeds.EPL_BOOTSTRAP, level, 1 + block.state)
    out["rows"] = epl_rows(
        hists, surface_seed=int(seed.generate_state(1)[0]), **knobs.rows_kwargs()
    )
    out["hists"] = hists
    return out


def combine_level(
    plan: AuditPlan,
    level: int,
    pieces: Sequence[dict[str, Any]],
    knobs: EPLKnobs,
    declared: Mapping[int, Any] | None = None,
) -> dict[str, Any]:
    """A level's EPL from its blocks' pieces (:func:`epl_blocks`, in any batches and order): per
    state, and pooled over states from the histograms merged in the level's block order.
    ``declared`` (query index -> its declared :class:`~auditlib.claims.NoiseLaw`, a published
    release's) puts those queries' floors at the declared noise."""
    by_state = {p["state"]: p for p in pieces}
    order = [b.state for b in plan.blocks_at(level)]
    if sorted(by_state) != sorted(order) or len(pieces) != len(order):
        raise ValueError(
            f"geolevel {level}: pieces of states {sorted(by_state)}, the level's blocks "
            f"{sorted(order)}"
        )
    nq = len(plan.queries)
    per_state: dict[int, list[dict[str, Any] | None]] = {}
    pooled: list[LatticeHistogram | None] = [None] * nq
    k = len(TRUTH_CLASSES)  # TopDown: unit totals by truth
    bias_sums, bias_n = np.zeros(k), np.zeros(k, dtype=np.int64)
    for s in order:
        p = by_state[s]
        if plan.strategy.topdown_bias:
            bias_sums += p["bias"][0]
            bias_n += p["bias"][1]
        per_state[s] = p["rows"]
        for i, h in enumerate(p["hists"]):
            if h is not None:
                pooled[i] = (pooled[i] or LatticeHistogram(h.spacing)).merge(h)
    refs = [None] * nq
    for qi, law in (declared or {}).items():
        refs[qi] = law.lattice_pmf() if law.discrete else law.moments()[0]
    level_seed = seeds.seed_sequence(plan.noise_seed, seeds.EPL_BOOTSTRAP, level)
    pooled_seed = seeds.seed_sequence(plan.noise_seed, seeds.EPL_BOOTSTRAP, level, 0)
    pooled_rows = epl_rows(
        pooled,
        references=refs,
        uncertainty_seed=int(level_seed.generate_state(1)[0]),
        surface_seed=int(pooled_seed.generate_state(1)[0]),
        **knobs.rows_kwargs(),
    )
    out = {"geolevel": level, "per_state": per_state, "pooled": pooled_rows}
    out["floor_reference"] = {
        q: f"declared {law.describe()}" for q, law in (declared or {}).items()
    }
    if plan.strategy.topdown_bias:
        out["total_bias"] = {"sums": bias_sums, "counts": bias_n}
    return out


def epl_geolevel(
    store: ResultStore,
    plan: AuditPlan,
    level: int,
    knobs: EPLKnobs,
    *,
    declared: dict[int, Any] | None = None,
) -> dict[str, Any]:
    """EPL of every query at one geolevel: per state (with the EPL(x) surface and its band), and
    pooled over states; the level's blocks as one batch, then combined (the audit runs the same
    functions in batches, one task each). ``declared``: as :func:`combine_level` takes it.

    ``knobs`` set the Flaxman–Petti estimate, the bias-aware one and the surfaces. The bootstrap
    and reference draws are keyed from the audit's seed, the level, the state (0 pooled) and
    the query.
    """
    pieces = epl_blocks(store, plan, level, plan.blocks_at(level), knobs)
    return combine_level(plan, level, pieces, knobs, declared)
