"""A TopDown run whose state's replicates are split over tasks, SIGKILLed (with its API server and
workers) once some replicate ranges are marked done, resumes at the granularity of (state,
replicate range): the finished ranges are not simulated again (their chunks are not rewritten),
the others are, and the published store verifies and holds the arrays of an undisturbed run
without the split."""

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

REPLICATES = 12
LEVELS = 5  # State, County, Tract, Block_Group, Block: one state (Puerto Rico), no nation


def spec(per_task: int) -> dict:
    return {
        "audit": {
            "allocation": "pl94_2021_production",
            "region": "PR",
            "replicates": REPLICATES,
            "seed": 5,
        },
        "population": {
            "states": 1,
            "fanout": {"County": 3, "Tract": 3, "Block_Group": 3, "Block": 4},
            "attributes": "pl94",
        },
        "release": {"kind": "topdown"},
        "accounting": {"deltas": [1e-10], "eps_grid_points": 20, "composed": False},
        "cluster": {"n_workers": 1, "tasks_per_worker": 0, "replicates_per_task": per_task},
    }


def done_ranges(staging: Path, per_task: int = 2) -> list[int]:
    """First replicates of the ranges whose every level's replicate digests are written (the
    digests are chunked by range: chunk k holds replicates k·per_task …)."""
    marks = staging / "residuals" / "replicate_sha256" / "c" / "0"
    if not marks.exists():
        return []
    per_range: dict[int, int] = {}
    for p in marks.glob("*/*/0"):
        per_range[int(p.parent.name)] = per_range.get(int(p.parent.name), 0) + 1
    return sorted(k * per_task for k, n in per_range.items() if n == LEVELS)


def test_a_killed_split_run_resumes_its_unfinished_ranges(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    from prefect_dask import DaskTaskRunner

    from flows.audit import audit_flow, run_id_for

    data = spec(2)  # 6 ranges of 2 replicates
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(dump_toml(data))
    s = parse_spec(data)
    run_id = run_id_for(s)
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
        while not done_ranges(staging):
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "no replicate range was marked done in time"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert not target.exists()
    finished = {r0 for s_, g, r0 in store.done_ranges(str(staging)) if s_ == 0}
    complete = [r0 for r0 in range(0, REPLICATES, 2) if r0 in set(done_ranges(staging))]
    assert complete and set(complete) <= finished and len(complete) < REPLICATES // 2, complete
    # the residual chunks of the finished ranges, as they were written before the kill
    before = {
        p.relative_to(staging): p.stat().st_mtime_ns
        for p in (staging / "residuals" / "residual" / "c").glob("*/*")
        if int(p.parent.name) * 2 in complete
    }
    assert before

    again = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resuming the interrupted run {run_id}" in again.stderr
    checksums.check(str(target))
    after = {k: (target / k).stat().st_mtime_ns for k in before}
    assert after == before  # the finished ranges were not written again

    # an undisturbed run, one task for all the replicates, 2 workers: the same arrays
    ref = str(tmp_path / "ref.zarr")
    whole = parse_spec(spec(0))
    flow = audit_flow.with_options(task_runner=DaskTaskRunner(address=dask_address))
    flow(whole, ref, run_id_for(whole))
    store.finalize(ref)
    got, want = array_digests(str(target)), array_digests(ref)
    assert len(want) > 30 and got == want
