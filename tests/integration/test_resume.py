"""Kill the flow process mid-run (SIGKILL, with its API server and workers), re-run the same command:
it resumes from the finished blocks and ends with a store identical to an undisturbed run. A second
run started on the same store meanwhile is refused and changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from storage import checksums, store
from tests.integration._processes import audit_run, dpaudit, resume, running, standalone_env
from tests.integration._specs import tiny_spec
from tests.integration._stores import array_digests as array_digests  # imported from here
from tests.integration._stores import assert_same_arrays, undisturbed_audit
from tests.integration.test_cli_run import FANOUT

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SPEC = tiny_spec(
    states=3, fanout=FANOUT, simulation={"max_cells_per_query": 4}, cluster={"n_workers": 1}
)
N_BLOCKS = 1 + 3 * 7  # simulated: the nation + 7 levels in each of 3 states
N_REGIONS = 4 * 8  # (nation + 3 states) x 8 levels; the other 10 regions are written empty


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
    from flows.spec.plan import make_plan

    run = audit_run(tmp_path, SPEC)
    target, staging, env = run.target, run.staging, standalone_env()

    from typer.testing import CliRunner  # imported before the run starts: the refusal is quick

    from flows.cli.app import app

    # 1. start the run in its own process group; SIGKILL all of it once a few blocks are marked
    with running(run.cmd, env, tmp_path, 300) as first:
        first.wait(lambda: holds_lock(target, first.pid), "lock of the store")  # before it can end
        # a second run on the same store meanwhile is refused before it touches anything
        second = CliRunner().invoke(app, run.cmd[len(dpaudit()) :])
        assert second.exit_code == 2, second.output
        assert f"another dpaudit run (pid {first.pid}) is writing" in second.stderr
        three = N_REGIONS - N_BLOCKS + 3  # >= 3 simulated blocks
        first.wait(lambda: marked_blocks(staging) >= three, "3 simulated blocks marked done")
    assert not target.exists()  # nothing published
    done = store.done_blocks(str(staging))
    # a block killed after its last write but before its seal is sealed by the resumed run, and
    # counts as resumed
    sealed_later = store.pending_blocks(str(staging))
    simulated = (done | sealed_later) & {(b.state, b.level) for b in make_plan(run.spec).blocks}
    assert len(done) < N_REGIONS and 3 <= len(simulated) < N_BLOCKS, (len(done), len(simulated))
    assert store.lock_path(str(target)).exists()  # left by the killed run (its pid is gone)

    # 2. the same command again: resumes, finishes, publishes, cleans up
    again = resume(run.cmd, env, tmp_path, run.run_id, 600)
    resumed = f"{N_BLOCKS} blocks ({len(simulated)} resumed)"
    assert resumed in again.stdout, (len(done), len(simulated), again.stdout[-1500:])
    assert sorted(p.name for p in target.parent.iterdir()) == ["a.zarr"]
    checksums.check(str(target))

    # 3. an undisturbed run of the same spec (in-process, another cluster) gives identical arrays
    ref = str(tmp_path / "ref.zarr")
    assert undisturbed_audit(run.spec, ref, dask_address)["resumed_blocks"] == 0
    assert_same_arrays(str(target), ref, at_least=31)
