"""``dpaudit mpl-coverage`` resumes like the audit: SIGKILL the command once some chunks are marked
done, re-run it, and the published group is identical to an undisturbed run's; a second run started
meanwhile is refused. A resumed flow computes only the chunks not marked done."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from auditlib.exceptions import StoreError
from auditlib.mpl.coverage import coverage_chunk
from storage import store
from tests.integration._processes import done_markers, dpaudit, resume, running, standalone_env
from tests.integration._stores import assert_resumed_coverage, assert_same_as_undisturbed

pytestmark = pytest.mark.integration

MECHS, EPS, REPS, CHUNK = ["laplace", "laplace_broken"], [0.7], 60, 10
N_CHUNKS = 2 * 1 * 6


@pytest.mark.slow
def test_killed_mpl_coverage_resumes_to_the_undisturbed_group(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    from prefect_dask import DaskTaskRunner
    from typer.testing import CliRunner

    from flows.cli.app import (
        app,
    )  # imported before the run starts: the second run is refused quickly
    from flows.experiments.mpl_coverage import PARTS, coverage_run_id, mpl_coverage_flow

    n, big_n, alpha, seed = 40_000, 100_000, 0.05, 11  # ~0.5-1 s per chunk: killed midway
    run_id = coverage_run_id(MECHS, EPS, REPS, n, big_n, alpha, seed, CHUNK)
    target = tmp_path / "out" / "mpl.zarr"
    staging = Path(store.staging_path(str(target), run_id))
    args = [a for m in MECHS for a in ("-m", m)] + ["-e", "0.7", "--reps", str(REPS)]
    args += ["--n", str(n), "--N", str(big_n), "--seed", str(seed), "--store", str(target)]
    cmd = [*dpaudit(), "mpl-coverage", *args]
    env = standalone_env()

    with running(cmd, env, tmp_path, 600) as first:  # one deadline for both chunks
        first.wait(lambda: done_markers(staging, PARTS) >= 1, "first chunk marked done")
        # a second run on the same store meanwhile is refused before it touches anything
        second = CliRunner().invoke(app, ["mpl-coverage", *args])
        assert second.exit_code == 2, second.output
        assert f"another dpaudit run (pid {first.pid}) is writing" in second.stderr
        first.wait(lambda: done_markers(staging, PARTS) >= 2, "second chunk marked done")
    assert not target.exists()  # nothing published
    done = store.done_parts(str(staging), PARTS)
    assert 2 <= len(done) < N_CHUNKS, len(done)
    assert store.lock_path(str(target)).exists()  # left by the killed run (its pid is gone)

    # the same command again: resumes the finished chunks, publishes, cleans up
    again = resume(cmd, env, tmp_path, run_id, 300)
    assert_resumed_coverage(again.stdout, len(done), N_CHUNKS, target, "mpl_coverage")

    # an undisturbed run (in-process, another cluster) gives identical arrays
    ref = str(tmp_path / "ref.zarr")
    flow = mpl_coverage_flow.with_options(task_runner=DaskTaskRunner(address=dask_address))
    summary = flow(ref, MECHS, EPS, REPS, n, big_n, alpha, seed, CHUNK)
    assert_same_as_undisturbed(summary, N_CHUNKS, ref, target)


def test_resumed_flow_computes_only_the_unfinished_chunks(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    """A chunk marked done holds sentinel bounds (99): a resumed run keeps them (it did not
    recompute that chunk) and computes the others, which match the pure function."""
    from prefect_dask import DaskTaskRunner

    from flows.experiments.mpl_coverage import GROUP, PARTS, coverage_run_id, mpl_coverage_flow

    kw = {"n": 2_000, "n_confidence": 5_000, "alpha": 0.05, "seed": 3}
    url = str(tmp_path / "mpl.zarr")
    run_id = coverage_run_id(["laplace"], [0.7, 1.5], 20, *kw.values(), CHUNK)
    # an interrupted run: the template and chunk 1 of cell (0, 1) finished
    store.claim_staging(url, run_id)
    flow = mpl_coverage_flow.with_options(task_runner=DaskTaskRunner(address=dask_address))
    rep, cell = (1, 2, 20), (1, 2, 2)
    f64 = "float64"
    arrays = {
        "lb": (rep, (1, 1, CHUNK), f64),
        "floor_driven": (rep, (1, 1, CHUNK), "bool"),
        "edge": (rep, (1, 1, CHUNK), "bool"),
        **{k: (cell, (1, 1, 1), f64) for k in ("epsilon_c", "epsilon", "claimed_epsilon")},
    }
    assert store.chunk_parts(url, PARTS, arrays, cell) == set()
    reps, one = (0, 1, slice(10, 20)), (0, 1, slice(1, 2))
    sentinel = {
        "lb": (reps, np.full(10, 99.0)),
        "floor_driven": (reps, np.zeros(10, bool)),
        "edge": (reps, np.zeros(10, bool)),
        **{k: (one, np.array([1.5])) for k in ("epsilon_c", "epsilon", "claimed_epsilon")},
    }
    store.write_part(url, PARTS, (0, 1, 1), sentinel)

    summary = flow(url, ["laplace"], [0.7, 1.5], 20, chunk=CHUNK, **kw)
    assert summary == {"cells": 2, "tasks": 4, "computed": 3, "resumed": 1}
    store.finalize(url)
    ds = store.open_group(url, GROUP)
    np.testing.assert_array_equal(ds.lb.values[0, 1, 10:], 99.0)  # kept, not recomputed
    np.testing.assert_array_equal(
        ds.lb.values[0, 1, :10], coverage_chunk("laplace", 1.5, 0, 10, cell=(0, 1), **kw)["lb"]
    )
    np.testing.assert_array_equal(
        ds.lb.values[0, 0], coverage_chunk("laplace", 0.7, 0, 20, cell=(0, 0), **kw)["lb"]
    )
    # the same store for another experiment is refused, with the fix in the message
    other = str(tmp_path / "other.zarr")
    store.claim_staging(other, "0123456789abcdef")
    with pytest.raises(StoreError, match=r"unfinished run of a different command.*--overwrite"):
        flow(other, ["laplace"], [0.7, 1.5], 20, chunk=CHUNK, **kw)
