"""Kill the flow process mid-run (SIGKILL, with its API server and workers), re-run the same command:
it resumes from the finished blocks and ends with a store identical to an undisturbed run. A second
run started on the same store meanwhile is refused and changes nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import zarr

from storage import checksums, store
from tests.integration._specs import tiny_spec, to_toml
from tests.integration.test_cli_run import FANOUT, dpaudit

pytestmark = pytest.mark.integration

SPEC = to_toml(
    tiny_spec(
        states=3, fanout=FANOUT, simulation={"max_cells_per_query": 4}, cluster={"n_workers": 1}
    )
)
N_BLOCKS = 1 + 3 * 7  # simulated: the nation + 7 levels in each of 3 states
N_REGIONS = 4 * 8  # (nation + 3 states) x 8 levels; the other 10 regions are written empty


def array_digests(url: str) -> dict[str, str]:
    """sha256 of every array of every group (values as stored), keyed 'group/name'."""
    root = zarr.open_group(url, mode="r", zarr_format=3)
    out = {}
    for gname, grp in root.groups():
        for name, arr in grp.arrays():
            values: Any = arr[...]
            out[f"{gname}/{name}"] = checksums.digest(values).hex()
    return out


def marked_blocks(staging: Path) -> int:
    marks = staging / "residuals" / "block_sha256" / "c"
    return sum(1 for p in marks.rglob("*") if p.is_file()) if marks.exists() else 0


def holds_lock(target: Path, pid: int) -> bool:
    """Whether the run ``pid`` holds the store's lock (its identity written into the lock file)."""
    try:
        return int(json.loads(store.lock_path(str(target)).read_text())["pid"]) == pid
    except (OSError, ValueError, KeyError, TypeError):
        return False


def test_killed_run_resumes_to_the_undisturbed_store(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    from prefect_dask import DaskTaskRunner

    from flows.audit import audit_flow, run_id_for
    from flows.spec import load_spec
    from flows.spec.plan import make_plan

    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(SPEC)
    spec = load_spec(spec_path)
    run_id = run_id_for(spec)
    target = tmp_path / "out" / "a.zarr"
    staging = Path(store.staging_path(str(target), run_id))
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    cmd = [*dpaudit(), "run", str(spec_path), "--store", str(target), "--no-report"]

    from typer.testing import CliRunner  # imported before the run starts: the refusal is quick

    from flows.cli.app import app

    # 1. start the run in its own process group; SIGKILL all of it once a few blocks are marked
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not holds_lock(target, proc.pid):  # early: before its simulation can finish
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "the run did not lock its store in time"
            time.sleep(0.05)
        # a second run on the same store meanwhile is refused before it touches anything
        second = CliRunner().invoke(app, cmd[len(dpaudit()) :])
        assert second.exit_code == 2, second.output
        assert f"another dpaudit run (pid {proc.pid}) is writing" in second.stderr
        while marked_blocks(staging) < N_REGIONS - N_BLOCKS + 3:  # >= 3 simulated blocks
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "no block was marked done in time"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert not target.exists()  # nothing published
    done = store.done_blocks(str(staging))
    simulated = done & {(b.state, b.geolevel) for b in make_plan(spec).blocks}
    assert len(done) < N_REGIONS and 3 <= len(simulated) < N_BLOCKS, (len(done), len(simulated))
    assert store.lock_path(str(target)).exists()  # left by the killed run (its pid is gone)

    # 2. the same command again: resumes, finishes, publishes, cleans up
    again = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resuming the interrupted run {run_id}" in again.stderr
    assert f"{N_BLOCKS} blocks ({len(simulated)} resumed)" in again.stdout
    assert sorted(p.name for p in target.parent.iterdir()) == ["a.zarr"]
    checksums.check(str(target))

    # 3. an undisturbed run of the same spec (in-process, another cluster) gives identical arrays
    ref = str(tmp_path / "ref.zarr")
    flow = audit_flow.with_options(task_runner=DaskTaskRunner(address=dask_address))
    summary = flow(spec, ref, run_id)
    assert summary["resumed_blocks"] == 0
    store.finalize(ref)
    got, want = array_digests(str(target)), array_digests(ref)
    assert len(want) > 30 and got == want
