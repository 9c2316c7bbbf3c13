"""A dense TopDown run with a national level (the nation sums its states' State-level releases)
whose states' replicates are split over tasks, SIGKILLed (with its API server and workers) once
some (state, replicate range) units are marked done, resumes: the same command again reports the
resumed run, does not simulate or write a finished range again (its chunks keep their mtimes,
although the nation sums its histograms: they are read back from the staging store), and
publishes a store that verifies, keeps none of those histograms, and holds the arrays of an
undisturbed run."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from flows.spec import parse_spec
from flows.spec.toml_writer import dump_toml
from storage import checksums, store
from tests.integration.test_cli_run import dpaudit
from tests.integration.test_resume import array_digests

pytestmark = pytest.mark.integration

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
            levels.setdefault(b.state, []).append(b.geolevel)
    return {
        (s, k * PER_TASK)
        for s, gs in levels.items()
        for k in range(REPLICATES // PER_TASK)
        if all((marks / str(s) / str(g) / str(k) / "0").exists() for g in gs)
    }


def test_a_killed_run_with_a_nation_resumes_without_redoing_finished_ranges(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    from prefect_dask import DaskTaskRunner

    from flows.audit import audit_flow, run_id_for
    from flows.kept_histograms import TOPDOWN_STATE_HISTOGRAMS
    from flows.spec.plan import make_plan

    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(dump_toml(SPEC))
    spec = parse_spec(SPEC)
    plan = make_plan(spec)
    assert [b for b in plan.blocks if b.state_key == 0]  # a national level: it sums the states
    run_id = run_id_for(spec)
    target = tmp_path / "out" / "a.zarr"
    staging = Path(store.staging_path(str(target), run_id))
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    cmd = [*dpaudit(), "run", str(spec_path), "--store", str(target), "--no-report"]

    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 600
        while not done_units(staging, plan):
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "no replicate range was marked done in time"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert not target.exists()
    finished = done_units(staging, plan)
    states = {b.state for b in plan.blocks if b.state_key}
    assert finished and len(finished) < len(states) * REPLICATES // PER_TASK, finished
    # the residual chunks (replicate chunk k: the range of replicates k·PER_TASK …) and range
    # markers of the finished ranges, as they were written before the kill
    item_chunk = int(store._array(str(staging), "truth").chunks[0])
    before: dict[Path, int] = {}
    for b in plan.blocks:
        ranges = [r0 // PER_TASK for s, r0 in finished if s == b.state]
        if not ranges:
            continue
        off, _, span = store.block_place(str(staging), b.state, b.geolevel)
        items = range(off // item_chunk, -(-(off + span) // item_chunk))
        res = staging / "residuals" / "residual" / "c"
        marks = staging / "residuals" / "replicate_sha256" / "c" / str(b.state) / str(b.geolevel)
        paths = [res / str(k) / str(i) for k in ranges for i in items]
        paths += [marks / str(k) / "0" for k in ranges]
        before.update({p.relative_to(staging): p.stat().st_mtime_ns for p in paths})
    assert len(before) >= len(finished) * 5 * 2, before  # 5 levels: State … Block

    again = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resuming the interrupted run {run_id}" in again.stderr
    checksums.check(str(target))
    after = {k: (target / k).stat().st_mtime_ns for k in before}
    assert after == before  # the finished ranges were neither simulated nor written again
    assert TOPDOWN_STATE_HISTOGRAMS not in store.groups(str(target))

    # an undisturbed run of the same spec (in-process, 2 workers): the same arrays
    ref = str(tmp_path / "ref.zarr")
    flow = audit_flow.with_options(task_runner=DaskTaskRunner(address=dask_address))
    flow(spec, ref, run_id)
    store.finalize(ref)
    assert store.groups(str(target)) == store.groups(ref)
    got, want = array_digests(str(target)), array_digests(ref)
    assert len(want) > 30 and got == want
