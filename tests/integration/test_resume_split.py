"""A TopDown run whose state's replicates are split over tasks, SIGKILLed (with its API server and
workers) once some replicate ranges are marked done, resumes at the granularity of (state,
replicate range): the finished ranges are not simulated again (their chunks are not rewritten),
the others are, and the published store verifies and holds the arrays of an undisturbed run
without the split."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.spec import parse_spec
from storage import checksums, store
from tests.integration._processes import audit_run, resume, run_until, standalone_env
from tests.integration._stores import assert_same_arrays, undisturbed_audit

pytestmark = [pytest.mark.integration, pytest.mark.slow]

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
    run = audit_run(tmp_path, spec(2))  # 6 ranges of 2 replicates
    staging, target, env = run.staging, run.target, standalone_env()

    run_until(run.cmd, env, tmp_path, lambda: bool(done_ranges(staging)), 600, "range marked done")
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

    resume(run.cmd, env, tmp_path, run.run_id, 900)
    checksums.check(str(target))
    after = {k: (target / k).stat().st_mtime_ns for k in before}
    assert after == before  # the finished ranges were not written again

    # an undisturbed run, one task for all the replicates, 2 workers: the same arrays
    ref = str(tmp_path / "ref.zarr")
    undisturbed_audit(parse_spec(spec(0)), ref, dask_address)
    assert_same_arrays(str(target), ref, at_least=31)
