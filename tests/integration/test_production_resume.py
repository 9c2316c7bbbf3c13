"""A TopDown run on the PL94 production schema (sparse, spine states and their nation), SIGKILLed
with its API server and workers once one state's blocks are marked done, resumes: the same command
again reports the resumed run, does not simulate or write the finished state again (its blocks'
chunks keep their mtimes, although the nation sums its State-level releases), continues the other
state after its kept chunks, and publishes a store that verifies and holds the arrays of an
undisturbed run."""

from __future__ import annotations

from pathlib import Path

import pytest
import xarray as xr
import zarr

from storage import checksums, residual_blocks, store
from tests.integration._processes import audit_run, resume, run_until, standalone_env
from tests.integration._stores import (
    assert_same_arrays,
    session_root,
    shared_undisturbed_audit,
)

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


def kept_levels(staging: Path, state: int) -> set[int]:
    """Levels of which the staging store keeps chunks of ``state`` (plan index), unfinished."""
    root = staging / "production_progress"
    if not root.exists():
        return set()
    names = [p.name.split("-") for p in root.iterdir() if p.is_dir()]
    return {int(n[2][1:]) for n in names if len(n) == 4 and int(n[0]) == state}


def kept_cpu_s(staging: Path, state: int) -> float:
    """The largest cost a kept chunk of ``state`` recorded (its task's CPU seconds so far);
    batches the kill left half-written are not read."""
    kept = zarr.open_group(str(staging / "production_progress"), mode="r")
    return max(
        float(g.attrs["cpu_s"])
        for name, g in kept.groups()
        if int(name.split("-")[0]) == state and g.attrs.get("complete")
    )


@pytest.mark.parametrize("per_task", [25, 1], ids=["whole-states", "ranges"])
def test_a_killed_production_run_resumes_without_redoing_finished_states(
    prefect_harness: None,
    dask_address: str,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    worker_id: str,
    per_task: int,
) -> None:
    """Whole states in one task each, or each state's 2 replicates in ranges of 1 (a task per
    range, one writing the state's blocks): killed once a state is done, run again, the finished
    state is not written again and the store holds what an undisturbed run of one task per
    state holds. Whole states also keep their chunks as they finish
    (``DPAUDIT_PROGRESS_EVERY_S=0``) and are killed once the other state has its Block_Group
    level kept: that state resumes from its kept chunks (the command says so), is charged what they
    cost, and still ends with the undisturbed run's arrays (whose workers keep nothing)."""
    from flows.spec.plan import make_plan

    spec = {**SPEC, "cluster": {**SPEC["cluster"], "replicates_per_task": per_task}}
    run = audit_run(tmp_path, spec)
    plan = make_plan(run.spec)
    assert plan.production is not None and plan.states[0] == "US"  # the nation sums the states
    staging, target, env = run.staging, run.target, standalone_env()
    inside = per_task == 25
    if inside:
        env["DPAUDIT_PROGRESS_EVERY_S"] = "0"

    def ready() -> bool:
        fin = finished_states(staging, plan)
        other = {1, 2} - fin
        return len(fin) == 1 and (not inside or 3 in kept_levels(staging, min(other)))

    run_until(run.cmd, env, tmp_path, ready, 600, "state marked done")
    assert not target.exists()
    finished = finished_states(staging, plan)
    assert len(finished) == 1, finished  # one state done, the other and the nation not
    assert (0, 0) not in store.done_blocks(str(staging))
    (state,) = finished
    before = block_files(staging, plan, state)
    assert len(before) >= 3 * 5, before
    if inside:
        (other,) = {1, 2} - finished
        assert {0, 1, 2, 3} <= kept_levels(staging, other)
        spent = kept_cpu_s(staging, other)
        assert spent > 0

    again = resume(run.cmd, env, tmp_path, run.run_id, 900)
    assert f"{len(plan.blocks)} blocks (5 resumed)" in again.stdout
    checksums.check(str(target))
    after = {k: (target / k).stat().st_mtime_ns for k in before}
    assert after == before  # the finished state was not written again
    assert not (target / "production_progress").exists()  # dropped before publishing
    if inside:
        assert "resume points inside unfinished states)" in again.stderr, again.stderr[-2000:]
        costs = xr.open_zarr(str(target), group="production").attrs["state_costs"]
        assert costs[plan.states[other]]["cpu_s"] > spent  # the kept work charged to it

    # an undisturbed run of the same spec (in-process, 2 workers, one task per state; one run
    # for both cases): the same arrays
    whole = run.spec.cluster.model_copy(update={"replicates_per_task": 25})
    ref = shared_undisturbed_audit(
        run.spec.model_copy(update={"cluster": whole}),
        session_root(tmp_path_factory, worker_id),
        dask_address,
    )
    assert_same_arrays(str(target), ref, at_least=21)
