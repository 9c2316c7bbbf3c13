"""Thin Prefect tasks: each calls one pure ``auditlib`` / ``storage`` function.

Large arrays never travel through Prefect: simulation tasks write their own chunk-aligned region of
the store and return a few numbers. Inputs are not hashed (``NO_CACHE``) and results not persisted.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from prefect import task
from prefect.cache_policies import NO_CACHE

from auditlib import seeds
from auditlib.allocations import load_allocation
from auditlib.epl import EPLKnobs
from auditlib.mpl.audit import mpl_geolevel as _mpl_geolevel
from flows.audit import kept_histograms
from flows.audit.account_cache import account_cached
from flows.audit.blocks import leaf_maps, topdown_nation, topdown_state
from flows.audit.claims import PublishedLevel, judge_level, judge_post_processed_levels
from flows.audit.epl_level import combine_level, epl_geolevel
from flows.audit.epl_level import epl_blocks as _epl_blocks
from flows.spec import AuditSpec
from flows.spec.audit_plan import AuditPlan, Block
from storage.result_store import ResultStore

#: names of exception classes (anywhere in an error's MRO) that are a moment's failure of the
#: network or an object store, besides :class:`OSError` (botocore's, distributed's lost comms)
TRANSIENT_ERRORS = frozenset(
    {"BotoCoreError", "CommClosedError", "StreamClosedError", "ConnectTimeoutError"}
)

#: the retry policy of every task: up to 2 more attempts, 5 s then 20 s later (±30 %), for a
#: transient error only (:func:`is_transient`: an I/O, network or S3 failure, a lost connection to a
#: worker); an error in the input or the computation (a :class:`DPAuditError`, ``ValueError``, ...)
#: would fail again and is not retried. A retry recomputes the same numbers: seeds are keyed by
#: block (``auditlib.seeds``), and blocks or parts already written and checksummed are skipped.
#: (A worker process that dies mid-task is not a task failure: Dask re-runs the task elsewhere.)
RETRIES = 2
RETRY_DELAYS_S = [5.0, 20.0]


def is_transient(exc: BaseException | None) -> bool:
    """Whether a task's error is worth another attempt (see :data:`RETRIES`)."""
    from auditlib.exceptions import DPAuditError

    if exc is None or isinstance(exc, DPAuditError):
        return False
    if isinstance(exc, OSError):  # TimeoutError, ConnectionError, s3fs's translated errors
        return True
    return any(c.__name__ in TRANSIENT_ERRORS for c in type(exc).__mro__)


def retry_transient(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect's ``retry_condition_fn``: retry the failed attempt only if its error is transient."""
    exc = getattr(state, "data", None)
    if not isinstance(exc, BaseException):
        try:
            exc = state.result(raise_on_failure=False)
        except Exception:
            return False
    return is_transient(exc if isinstance(exc, BaseException) else None)


TASK_OPTS: dict[str, Any] = {
    "cache_policy": NO_CACHE,
    "persist_result": False,
    "retries": RETRIES,
    "retry_delay_seconds": RETRY_DELAYS_S,
    "retry_jitter_factor": 0.3,
    "retry_condition_fn": retry_transient,
}


def _simulate_one(store: ResultStore, plan: AuditPlan, block: Block) -> int:
    """Simulate every replicate of one (state, geolevel) block, write its region (data, then its
    checksums: the block's done-marker); return its item count."""
    res = plan.strategy.simulate_block(plan, block)
    return store.write_residual_block(block.state, block.level, res)


@task(name="simulate-block", **TASK_OPTS)
def simulate_block(store: ResultStore, plan: AuditPlan, block: Block) -> dict[str, Any]:
    """Simulate every replicate of one (state, geolevel) block and write its region."""
    t0 = time.perf_counter()
    n = _simulate_one(store, plan, block)
    return {"label": block.label, "n_items": n, "seconds": time.perf_counter() - t0}


@task(name="simulate-blocks", **TASK_OPTS)
def simulate_blocks(store: ResultStore, plan: AuditPlan, blocks: list[Block]) -> dict[str, Any]:
    """Simulate a batch of blocks one after the other, each with its own keyed seeds, region write
    and checksums; blocks already marked done in the store (a re-run of this task after its worker
    died, or of the flow) are skipped."""
    t0 = time.perf_counter()
    done = store.done_blocks()
    todo = [b for b in blocks if (b.state, b.level) not in done]
    n = sum(_simulate_one(store, plan, b) for b in todo)
    return {
        "blocks": len(blocks),
        "simulated": len(todo),
        "n_items": n,
        "seconds": time.perf_counter() - t0,
    }


def _topdown_one(
    store: ResultStore,
    plan: AuditPlan,
    block: Block,
    replicates: tuple[int, int] | None = None,
    keep: bool = False,
) -> dict[str, Any]:
    r0, r1 = (0, plan.replicates) if replicates is None else replicates
    blocks, state_dp, state_truth = topdown_state(plan, block, (r0, r1))
    if keep:  # before the blocks: their range markers say the range is finished
        kept_histograms.save_range(store, block.state, r0, state_dp, state_truth)
    n = 0
    for gi, res in blocks.items():
        n += store.write_residual_block(block.state, gi, res, replicates=(r0, r1))
    return {
        "state": block.state,
        "replicates": (r0, r1),
        "n_items": n,
        "state_dp": state_dp,
        "state_truth": state_truth,
    }


@task(name="simulate-topdown-state", **TASK_OPTS)
def simulate_topdown_state(store: ResultStore, plan: AuditPlan, block: Block) -> dict[str, Any]:
    """Every replicate of one state's TopDown-style release; writes the state's region at every
    geolevel and returns the State level's histograms (small) for the national sum."""
    t0 = time.perf_counter()
    out = _topdown_one(store, plan, block)
    return {"label": block.label, "seconds": time.perf_counter() - t0, **out}


@task(name="simulate-topdown-states", **TASK_OPTS)
def simulate_topdown_states(
    store: ResultStore,
    plan: AuditPlan,
    blocks: list[Block],
    nation: bool,
    ranges: list[tuple[int, int]] | None = None,
) -> dict[str, Any]:
    """A batch of TopDown states (each given by its State-level block), one after the other;
    with ``ranges`` (one per block: [start, stop) of its replicates) only those replicates of it,
    written as that range of the state's blocks (a state's replicates may be split over tasks).

    A (state, range) whose every block is marked done for that range is not simulated again: with
    a ``nation`` (which sums the states' State-level histograms, :func:`simulate_topdown_nation`)
    its histograms are read back from the staging store (kept there before its blocks were
    written, ``flows.audit.kept_histograms``; a range finished without them runs again).
    """
    t0 = time.perf_counter()
    units = list(zip(blocks, ranges or [(0, plan.replicates)] * len(blocks), strict=True))
    done = store.done_ranges()
    states, simulated, n_items = [], 0, 0
    for b, rr in units:
        finished = all((o.state, o.level, rr[0]) in done for o in plan.blocks if o.state == b.state)
        if finished and not nation:
            continue
        kept = kept_histograms.load_range(store, b.state, rr) if finished else None
        if kept is not None:
            states.append(
                {"state": b.state, "replicates": rr, "state_dp": kept[0], "state_truth": kept[1]}
            )
            continue
        one = _topdown_one(store, plan, b, rr, keep=nation)
        simulated, n_items = simulated + 1, n_items + one["n_items"]
        states.append({k: one[k] for k in ("state", "replicates", "state_dp", "state_truth")})
    return {
        "blocks": sum(1 for b in plan.blocks for s, _ in units if b.state == s.state),
        "simulated": simulated,
        "n_items": n_items,
        "seconds": time.perf_counter() - t0,
        "states": states,
    }


@task(name="simulate-topdown-nation", **TASK_OPTS)
def simulate_topdown_nation(
    store: ResultStore, plan: AuditPlan, block: Block, batches: list[dict[str, Any]]
) -> dict[str, Any]:
    """The national level of a TopDown-style release: the sum of the states' histograms (from the
    results of :func:`simulate_topdown_states` or :func:`simulate_topdown_state`), in state order;
    a state whose replicates were split over tasks has its ranges' histograms joined in order."""
    t0 = time.perf_counter()
    parts = sorted(
        (s for r in batches for s in r.get("states", [r])),
        key=lambda s: (int(s["state"]), int(s.get("replicates", (0, 0))[0])),
    )
    dp: dict[int, list[np.ndarray]] = {}
    truth: dict[int, np.ndarray] = {}
    for s in parts:
        dp.setdefault(int(s["state"]), []).append(np.asarray(s["state_dp"]))
        truth[int(s["state"])] = s["state_truth"]
    order = sorted(dp)
    short = [k for k in order if sum(len(a) for a in dp[k]) != plan.replicates]
    if short:
        raise ValueError(f"states {short}: not every replicate range reached the national sum")
    res = topdown_nation(
        plan, block.level, [np.concatenate(dp[k]) for k in order], [truth[k] for k in order]
    )
    n = store.write_residual_block(block.state, block.level, res)
    return {"label": block.label, "n_items": n, "seconds": time.perf_counter() - t0}


@task(name="write-empty-blocks", **TASK_OPTS)
def write_empty_blocks(
    store: ResultStore, plan: AuditPlan, regions: list[tuple[int, int]] | None = None
) -> int:
    """Write the plan's regions without data (or only ``regions`` of them, when resuming)."""
    todo = list(plan.empty) if regions is None else regions
    for s, g in todo:
        store.write_residual_block(s, g, None)
    return len(todo)


#: A batch of one geolevel's blocks reduced, one after the other, to their pieces of the level's
#: EPL: each state's rows, per-query lattice histograms and TopDown bias sums (the settings:
#: ``spec.epl.knobs()``).
epl_blocks = task(name="epl-blocks", **TASK_OPTS)(_epl_blocks)

#: EPL of every query at one geolevel whose blocks are one batch: the batch and its combine in one
#: task, the result :func:`epl_combine`'s.
epl_level = task(name="epl", **TASK_OPTS)(epl_geolevel)


@task(name="epl", **TASK_OPTS)
def epl_levels(
    store: ResultStore,
    plan: AuditPlan,
    levels: list[int],
    knobs: EPLKnobs,
    *,
    declared: dict[int, dict[int, Any] | None],
) -> list[dict[str, Any]]:
    """:func:`epl_level` of several geolevels whose blocks are one batch each, in one task, in
    order; ``declared``: each level's ``declared`` (a level not in it: none)."""
    return [epl_geolevel(store, plan, g, knobs, declared=declared.get(g)) for g in levels]


@task(name="epl-combine", **TASK_OPTS)
def epl_combine(
    plan: AuditPlan,
    level: int,
    batches: list[list[dict[str, Any]]],
    knobs: EPLKnobs,
    *,
    declared: dict[int, Any] | None = None,
) -> dict[str, Any]:
    """EPL of every query at one level, per state and pooled, from the pieces of its blocks
    (the results of :func:`epl_blocks`) merged in the level's block order
    (:func:`flows.audit.epl_level.combine_level`); ``declared`` (query index -> its declared
    :class:`~auditlib.claims.NoiseLaw`, a published release's) puts those queries' floors at the
    declared noise."""
    pieces = [p for batch in batches for p in batch]
    return combine_level(plan, level, pieces, knobs, declared)


def _account(
    allocation: str,
    neighbours: str,
    universe: str,
    region: str,
    geolevel: str | None,
    deltas: list[float],
    eps_grid: np.ndarray,
    alpha_grid: np.ndarray | None = None,
    calibration_delta: float | None = None,
    label: str | None = None,
    use_cache: bool = True,
) -> dict[str, Any]:
    """Exact accounting of one geolevel (or, with ``geolevel=None``, all levels composed); with
    ``calibration_delta`` also Su, Su & Wang's reduced noise at that δ. ``label``: the name the result
    is stored under (default: ``geolevel``; a table's level measured as that geolevel).
    ``use_cache``: reuse (and store) the result in the persistent cache (:mod:`flows.audit.account_cache`)."""
    # discrete Gaussian (σ², count) pairs, or the loss components of an allocation file's mixed noise
    comps = load_allocation(allocation).accounting_components(
        neighbours, universe, region, geolevel
    )
    out = account_cached(
        allocation,
        neighbours,
        universe,
        region,
        geolevel,
        comps,
        deltas,
        eps_grid,
        alpha_grid,
        calibration_delta,
        use_cache=use_cache,
    )
    out["geolevel"] = label if label is not None else geolevel
    return out


#: :func:`_account` as a Prefect task
account = task(name="account", **TASK_OPTS)(_account)


@task(name="account", **TASK_OPTS)
def account_levels(
    allocation: str,
    neighbours: str,
    universe: str,
    region: str,
    levels: list[tuple[str | None, str]],
    deltas: list[float],
    eps_grid: np.ndarray,
    alpha_grid: np.ndarray | None = None,
    calibration_delta: float | None = None,
    use_cache: bool = True,
) -> list[dict[str, Any]]:
    """:func:`_account` of several geolevels in one task, in order: ``levels`` holds each one's
    (geolevel measured as, label stored under)."""
    return [
        _account(
            allocation,
            neighbours,
            universe,
            region,
            g,
            deltas,
            eps_grid,
            alpha_grid,
            calibration_delta,
            label,
            use_cache,
        )
        for g, label in levels
    ]


@task(name="claim", **TASK_OPTS)
def claim_level(
    store: ResultStore, plan: AuditPlan, level: PublishedLevel, delta: float, threshold: float
) -> dict[str, Any]:
    """The verdict on a published level's declared claim (:func:`flows.audit.claims.judge_level`)."""
    return judge_level(store, plan, level, delta=delta, threshold=threshold)


@task(name="claim-post-processed", **TASK_OPTS)
def claim_post_processed(
    spec: AuditSpec,
    plan: AuditPlan,
    levels: list[PublishedLevel],
    delta: float,
    threshold: float,
) -> list[dict[str, Any]]:
    """The verdicts on the levels of a release declared post-processed: one reference
    simulation, every level tested against it (:func:`flows.audit.claims.judge_post_processed_levels`)."""
    return judge_post_processed_levels(spec, plan, levels, delta=delta, threshold=threshold)


#: keyed stream of the composed EPL's bootstrap: (EPL_BOOTSTRAP, COMPOSED_EPL_KEY), beyond any
#: level (index in AuditPlan.geolevels) used by the per-level streams
COMPOSED_EPL_KEY = 1000


@task(name="epl-composed", **TASK_OPTS)
def epl_composed(
    store: ResultStore,
    plan: AuditPlan,
    knobs: EPLKnobs,
) -> dict[str, Any]:
    """Composed EPL of the counts containing one person, over every released level of a Flaxman 2019
    tree (paths leaf → root), with the cross-level residual correlations; each level's EPL is the
    bias-aware estimate with the spec's knobs (``knobs.bias_aware`` on ``knobs.percentiles``)."""
    from auditlib.epl.composed import composed_epl

    if not plan.strategy.composed_epl:
        raise ValueError("epl_composed needs a tree release (a tree with known paths)")
    released = [b.level for b in sorted(plan.blocks, key=lambda b: b.level)]
    levels = [store.read_residuals(0, g)[0] for g in released]
    _, maps = leaf_maps(plan, released)
    seed = seeds.seed_sequence(plan.noise_seed, seeds.EPL_BOOTSTRAP, COMPOSED_EPL_KEY)
    kw = knobs.bias_aware.surface_kwargs(knobs.percentiles)
    n_boot, confidence = kw.pop("n_boot"), kw.pop("confidence")
    c = composed_epl(levels, maps, n_boot=n_boot, confidence=confidence, seed=seed, **kw)
    return {"geolevels": released, **c.to_dict(), "correlation": c.correlation}


@task(name="mpl-geolevel", **TASK_OPTS)
def mpl_geolevel(geolevel: str, level: int, settings: dict[str, Any]) -> dict[str, Any]:
    """MPL of one geolevel's released cell count (D vs D′): LB, curves, flags, δ(ε); ``level``:
    its index in ``AuditPlan.geolevels``."""
    return _mpl_geolevel(geolevel, level, **settings)


@task(name="mpl-geolevel", **TASK_OPTS)
def mpl_geolevels(levels: list[tuple[str, int]], settings: dict[str, Any]) -> list[dict[str, Any]]:
    """:func:`mpl_geolevel` of several geolevels (each its name and index) in one task, in order."""
    return [_mpl_geolevel(g, i, **settings) for g, i in levels]
