"""A TopDown run on the PL94 production schema (sparse, spine states and their nation), SIGKILLed
with its API server and workers once one state's blocks are marked done, resumes: the same command
again reports the resumed run, does not simulate or write the finished state again (its blocks'
chunks keep their mtimes, although the nation sums its State-level releases), and publishes a
store that verifies and holds the arrays of an undisturbed run."""

from __future__ import annotations

from pathlib import Path

import pytest
import xarray as xr
import zarr

from storage import checksums, residual_blocks, store
from tests.integration._processes import audit_run, resume, run_until, standalone_env
from tests.integration._stores import assert_same_arrays, undisturbed_audit

pytestmark = [pytest.mark.integration, pytest.mark.slow]

STATES = ["ST13", "ST04"]  # the two smallest states of the spine of seed 7 (247k, 377k people)
SPEC = {
    "audit": {"allocation": "pl94_2021_production", "replicates": 2, "seed": 11},
    "population": {
        "kind": "spine",
        "seed": 7,
        "spine_states": STATES,
        "attributes": "pl94_production",
    },
    "release": {"kind": "topdown"},
    "epl": {"n_boot": 20, "n_null": 20},
    "accounting": {"deltas": [1e-10], "eps_grid_points": 20, "composed": False},
    "cluster": {"n_workers": 1},
}


def finished_states(staging: Path, plan) -> set[int]:  # type: ignore[no-untyped-def]
    """States (plan indices, the nation left out) whose every block is marked done."""
    marks = staging / "residuals" / "block_sha256" / "c"
    if not marks.exists():
        return set()
    done = store.done_blocks(str(staging))
    states = {b.state for b in plan.blocks if b.state_key}
    return {
        s for s in states if all((b.state, b.level) in done for b in plan.blocks if b.state == s)
    }


def block_files(root: Path, plan, state: int) -> dict[Path, int]:  # type: ignore[no-untyped-def]
    """mtimes of the files a state's blocks wrote: their residual and item chunks and markers."""
    url = str(root)
    item_chunk = int(residual_blocks.residual_array(url, "truth").chunks[0])
    out: dict[Path, int] = {}
    for b in plan.blocks:
        if b.state != state:
            continue
        off, _, span = store.block_place(url, b.state, b.level)
        chunks = range(off // item_chunk, (off + span) // item_chunk)
        paths = [p for k in chunks for p in (root / "residuals" / "residual" / "c").glob(f"*/{k}")]
        paths += [root / "residuals" / "truth" / "c" / str(k) for k in chunks]  # unless all 0
        paths += [p for p in (root / "residuals" / "block_sha256" / "c" / str(b.state) /
                              str(b.level)).rglob("*") if p.is_file()]  # fmt: skip
        out.update({p.relative_to(root): p.stat().st_mtime_ns for p in paths if p.exists()})
    return out


@pytest.mark.parametrize("per_task", [25, 1], ids=["whole-states", "ranges"])
def test_a_killed_production_run_resumes_without_redoing_finished_states(
    prefect_harness: None, dask_address: str, tmp_path: Path, per_task: int
) -> None:
    """Whole states in one task each, or each state's 2 replicates in ranges of 1 (a task per
    range, one writing the state's blocks): killed once a state is done, run again, the finished
    state is not written again and the store holds what an undisturbed run of one task per
    state holds."""
    from flows.spec.plan import make_plan

    spec = {**SPEC, "cluster": {**SPEC["cluster"], "replicates_per_task": per_task}}
    run = audit_run(tmp_path, spec)
    plan = make_plan(run.spec)
    assert plan.production is not None and plan.states[0] == "US"  # the nation sums the states
    staging, target, env = run.staging, run.target, standalone_env()

    done = "state marked done"
    run_until(run.cmd, env, tmp_path, lambda: bool(finished_states(staging, plan)), 600, done)
    assert not target.exists()
    finished = finished_states(staging, plan)
    assert len(finished) == 1, finished  # one state done, the other and the nation not
    assert (0, 0) not in store.done_blocks(str(staging))
    (state,) = finished
    before = block_files(staging, plan, state)
    assert len(before) >= 3 * 5, before

    again = resume(run.cmd, env, tmp_path, run.run_id, 900)
    assert f"{len(plan.blocks)} blocks (5 resumed)" in again.stdout
    checksums.check(str(target))
    after = {k: (target / k).stat().st_mtime_ns for k in before}
    assert after == before  # the finished state was not written again

    # an undisturbed run of the same spec (in-process, 2 workers): the same arrays
    ref = str(tmp_path / "ref.zarr")
    undisturbed_audit(run.spec.model_copy(update={"cluster": run.spec.cluster.model_copy(
        update={"replicates_per_task": 25})}), ref, dask_address)  # fmt: skip
    assert_same_arrays(str(target), ref, at_least=21)


def progress_levels(staging: Path) -> set[int]:
    """Levels of which the staging store keeps chunks of an unfinished state."""
    root = staging / "production_progress"
    if not root.exists():
        return set()
    return {int(p.name.split("-L")[1].split("-")[0]) for p in root.iterdir() if "-L" in p.name}


def test_a_run_killed_inside_a_state_resumes_from_its_kept_chunks(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    """One state, its chunks saved as they finish (``DPAUDIT_PROGRESS_EVERY_S=0``), SIGKILLed once
    its Block_Group level is kept and before the state is done: the same command again says it
    resumes from points inside the state and publishes the arrays of an undisturbed run (whose
    workers, without the variable, keep nothing: the kept chunks change no value)."""
    from flows.spec.plan import make_plan

    spec = {**SPEC, "population": {**SPEC["population"], "spine_states": ["ST13"]}}
    spec["audit"] = {**SPEC["audit"], "replicates": 1}
    run = audit_run(tmp_path, spec)
    plan = make_plan(run.spec)
    staging, env = run.staging, {**standalone_env(), "DPAUDIT_PROGRESS_EVERY_S": "0"}

    def block_group_kept() -> bool:
        return 3 in progress_levels(staging)

    run_until(run.cmd, env, tmp_path, block_group_kept, 600, "Block_Group level kept")
    assert not finished_states(staging, plan)  # killed inside the state
    assert {0, 1, 2, 3} <= progress_levels(staging)
    kept = zarr.open_group(str(staging / "production_progress"), mode="r")
    spent = max(  # recorded with each save (the kill may have come while one was written)
        float(g.attrs["cpu_s"]) for _, g in kept.groups() if g.attrs.get("complete") is True
    )
    assert spent > 0

    again = resume(run.cmd, env, tmp_path, run.run_id, 900)
    assert "resume points inside unfinished states)" in again.stderr, again.stderr[-2000:]
    checksums.check(str(run.target))
    assert not (run.target / "production_progress").exists()  # dropped before publishing
    # the state's cost includes the killed run's kept work
    cost = xr.open_zarr(str(run.target), group="production").attrs["state_costs"]["ST13"]
    assert cost["cpu_s"] > spent

    ref = str(tmp_path / "ref.zarr")
    undisturbed_audit(run.spec, ref, dask_address)
    assert_same_arrays(str(run.target), ref, at_least=10)
