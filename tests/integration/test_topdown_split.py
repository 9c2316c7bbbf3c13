"""A state's TopDown replicates split over several tasks (``cluster.replicates_per_task``) store
exactly what one task per state stores, whatever the split and the number of workers: every array
of the store compared by value (residuals, item variables, checksums, EPL, accounting). The
residual chunks of the replicate axis follow the split, so no chunk is written by two tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import zarr

from flows.spec import parse_spec
from storage import checksums, store
from storage.residuals import REPLICATE_CHUNK_ATTR, REPLICATE_SHA256
from tests.integration.test_resume import array_digests

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FANOUT = {"County": 2, "Tract": 2, "Block_Group": 2, "Block": 3}


def spec(replicates_per_task: int) -> dict[str, Any]:
    return {
        "audit": {"allocation": "pl94_2021_production", "replicates": 4, "seed": 7},
        "population": {"states": 2, "fanout": FANOUT, "attributes": "pl94"},
        "release": {"kind": "topdown"},
        "accounting": {"deltas": [1e-10], "eps_grid_points": 20, "composed": False},
        "cluster": {"replicates_per_task": replicates_per_task, "tasks_per_worker": 0},
    }


def run(tmp_path: Path, name: str, per_task: int, address: str) -> str:
    from prefect_dask import DaskTaskRunner

    from flows.audit.flow import audit_flow, run_id_for

    s = parse_spec(spec(per_task))
    url = str(tmp_path / name)
    summary = audit_flow.with_options(task_runner=DaskTaskRunner(address=address))(
        s, url, run_id_for(s)
    )
    assert summary["resumed_blocks"] == 0
    store.finalize(url)
    return url


def test_split_replicates_store_what_one_task_stores(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    # (one worker against two: tests/integration/test_resume_split.py)
    whole = run(tmp_path, "whole.zarr", 0, dask_address)  # one task per state
    by_one = run(tmp_path, "one.zarr", 1, dask_address)  # 4 tasks per state
    by_three = run(tmp_path, "three.zarr", 3, dask_address)  # ranges [0, 3) and [3, 4)

    want = array_digests(whole)
    assert len(want) > 30 and "residuals/residual" in want
    assert array_digests(by_one) == want
    assert array_digests(by_three) == want
    for url, chunk in ((whole, 4), (by_one, 1), (by_three, 3)):
        grp = zarr.open_group(url, mode="r", zarr_format=3, path="residuals")
        assert grp.attrs[REPLICATE_CHUNK_ATTR] == chunk
        assert grp["residual"].chunks[0] == chunk  # type: ignore[union-attr]
        assert grp[REPLICATE_SHA256].chunks[2] == chunk  # type: ignore[union-attr]
        v = checksums.check(url)
        assert v.blocks > 0 and not v.problems
