"""A dense TopDown run with a national level (the nation sums its states' State-level releases)
whose states' replicates are split over tasks, SIGKILLed (with its API server and workers) once
some (state, replicate range) units are marked done, resumes: the same command again reports the
resumed run, does not simulate or write a finished range again (its chunks keep their mtimes,
although the nation sums its histograms: they are read back from the staging store), and
publishes a store that verifies, keeps none of those histograms, and holds the arrays of an
undisturbed run."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage import checksums, residual_blocks, store
from tests.integration._processes import audit_run, resume, run_until, standalone_env
from tests.integration._stores import assert_same_arrays, undisturbed_audit

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPLICATES = 6
PER_TASK = 2  # 3 ranges per state: the replicate digests' chunk k is replicates k·PER_TASK …

SPEC = {
    "audit": {"allocation": "pl94_2021_production", "replicates": REPLICATES, "seed": 5},
    "population": {
        "states": 2,
        "fanout": {"County": 2, "Tract": 2, "Block_Group": 2, "Block": 3},
        "attributes": "pl94",
    },
    "release": {"kind": "topdown"},
    "epl": {"n_boot": 20, "n_null": 20},
    "accounting": {"deltas": [1e-10], "eps_grid_points": 20, "composed": False},
    "cluster": {"n_workers": 1, "tasks_per_worker": 0, "replicates_per_task": PER_TASK},
}


def done_units(staging: Path, plan) -> set[tuple[int, int]]:  # type: ignore[no-untyped-def]
    """(state, first replicate) of the simulated states' ranges (the nation's empty regions left
    out) whose every block has its replicate digests written."""
    marks = staging / "residuals" / "replicate_sha256" / "c"
    if not marks.exists():
        return set()
    levels: dict[int, list[int]] = {}
    for b in plan.blocks:
        if b.state_key:
            levels.setdefault(b.state, []).append(b.level)
    return {
        (s, k * PER_TASK)
        for s, gs in levels.items()
        for k in range(REPLICATES // PER_TASK)
        if all((marks / str(s) / str(g) / str(k) / "0").exists() for g in gs)
    }


def test_a_killed_run_with_a_nation_resumes_without_redoing_finished_ranges(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    from flows.audit.kept_histograms import TOPDOWN_STATE_HISTOGRAMS
    from flows.spec.plan import make_plan

    run = audit_run(tmp_path, SPEC)
    plan = make_plan(run.spec)
    assert [b for b in plan.blocks if b.state_key == 0]  # a national level: it sums the states
    staging, target, env = run.staging, run.target, standalone_env()

    unit = "replicate range marked done"
    run_until(run.cmd, env, tmp_path, lambda: bool(done_units(staging, plan)), 600, unit)
    assert not target.exists()
    finished = done_units(staging, plan)
    states = {b.state for b in plan.blocks if b.state_key}
    assert finished and len(finished) < len(states) * REPLICATES // PER_TASK, finished
    # the residual chunks (replicate chunk k: the range of replicates k·PER_TASK …) and range
    # markers of the finished ranges, as they were written before the kill
    item_chunk = int(residual_blocks.residual_array(str(staging), "truth").chunks[0])
    before: dict[Path, int] = {}
    for b in plan.blocks:
        ranges = [r0 // PER_TASK for s, r0 in finished if s == b.state]
        if not ranges:
            continue
        # the block's planned place (its n_items is written by its first range, which may not
        # have finished when a later one did): the chunks of it that a finished range wrote
        off, cap, _ = store.block_place(str(staging), b.state, b.level)
        items = range(off // item_chunk, -(-(off + cap) // item_chunk))
        res = staging / "residuals" / "residual" / "c"
        marks = staging / "residuals" / "replicate_sha256" / "c" / str(b.state) / str(b.level)
        paths = [res / str(k) / str(i) for k in ranges for i in items]
        paths = [p for p in paths if p.exists()]
        paths += [marks / str(k) / "0" for k in ranges]
        before.update({p.relative_to(staging): p.stat().st_mtime_ns for p in paths})
    assert len(before) >= len(finished) * 5 * 2, before  # 5 levels: State … Block

    resume(run.cmd, env, tmp_path, run.run_id, 900)
    checksums.check(str(target))
    after = {k: (target / k).stat().st_mtime_ns for k in before}
    assert after == before  # the finished ranges were neither simulated nor written again
    assert TOPDOWN_STATE_HISTOGRAMS not in store.groups(str(target))

    # an undisturbed run of the same spec (in-process, 2 workers): the same arrays
    ref = str(tmp_path / "ref.zarr")
    undisturbed_audit(run.spec, ref, dask_address)
    assert_same_arrays(str(target), ref, at_least=31)
