"""Batched simulation tasks give the store of one task per block: identical array checksums, fewer
task runs, named for their states in the Prefect API; the per-level accounting and MPL tasks are
grouped one per worker, named for their levels."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from flows.spec import parse_spec
from storage import store
from tests.integration._specs import tiny_spec
from tests.integration.test_resume import array_digests
from tests.integration.test_worker_faults import task_runs_of_flow_run

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ALLOCATION = tiny_spec(states=2, fanout={"County": 2}, audit={"seed": 41}, mpl={"enabled": True})
TOPDOWN = {
    "audit": {"allocation": "pl94_2021_production", "replicates": 2, "seed": 43},
    "population": {"states": 3, "fanout": {"County": 2, "Tract": 1, "Block_Group": 1, "Block": 2}},
    "release": {"kind": "topdown"},
    "accounting": {"deltas": [1e-10], "eps_grid_points": 20, "composed": False},
}


def run(tmp_path: Path, name: str, data: dict[str, Any], address: str, per_worker: int) -> Any:
    from prefect_dask import DaskTaskRunner

    from flows.audit.flow import audit_flow, run_id_for

    s = parse_spec({**data, "cluster": {"n_workers": 2, "tasks_per_worker": per_worker}})
    url = str(tmp_path / name)
    state = audit_flow.with_options(task_runner=DaskTaskRunner(address=address))(
        s, url, run_id_for(s), return_state=True
    )
    assert state.is_completed(), state.message
    store.finalize(url)
    names = [tr.name for tr in task_runs_of_flow_run(str(state.state_details.flow_run_id))]
    return url, names


@pytest.mark.parametrize(
    ("data", "prefix", "n_sim_blocks", "unit"),
    [(ALLOCATION, "simulate ", 1 + 2 * 7, "blocks"), (TOPDOWN, "topdown ", 3, "states")],
    ids=["allocation", "topdown"],
)
def test_batched_store_equals_one_task_per_block(
    prefect_harness: None,
    dask_address: str,
    tmp_path: Path,
    data: dict[str, Any],
    prefix: str,
    n_sim_blocks: int,
    unit: str,
) -> None:
    single, single_names = run(tmp_path, "single.zarr", data, dask_address, per_worker=0)
    batched, batched_names = run(tmp_path, "batched.zarr", data, dask_address, per_worker=1)
    want = array_digests(single)
    assert len(want) > 20 and array_digests(batched) == want

    nation = "topdown US/US"  # the national sum: its own task, after the states
    sims = sorted(n for n in single_names if n.startswith(prefix) and n != nation)
    assert len(sims) == n_sim_blocks and not any("(" in n for n in sims)
    sims = sorted(n for n in batched_names if n.startswith(prefix) and n != nation)
    assert len(sims) == 2, sims  # 2 workers x 1 task per worker
    pattern = rf"{prefix}(US|ST0\d)(–ST0\d)?(, ST0\d)? \((\d+) {unit}\)"
    one = rf"{prefix}(US|ST0\d)/\w+"  # a batch of one is named for its block
    counts = [
        1 if re.fullmatch(one, n) else int(m.group(4)) if (m := re.fullmatch(pattern, n)) else 0
        for n in sims
    ]
    assert all(counts) and sum(counts) == n_sim_blocks, sims  # each block (state) in one task

    # the per-level tasks (accounting, MPL, a level's whole EPL): one per level in per-block
    # mode, else in at most one task per worker, each level in exactly one (the stores are
    # equal, above); a level's EPL pieces, one per block (per-block mode), are not grouped
    levels = sorted(n.removeprefix("simulate ").split("/")[1] for n in single_names if "/" in n)
    for stage in ("account ", "mpl ", "epl "):
        if prefix == "topdown " and stage != "account ":  # TopDown: states' tasks, no MPL
            continue
        one_each = [
            n.removeprefix(stage) for n in single_names if n.startswith(stage) and "/" not in n
        ]
        grouped = [n.removeprefix(stage) for n in batched_names if n.startswith(stage)]
        assert len(one_each) >= 3 and not any(", " in n for n in one_each), one_each
        assert sorted(one_each) == sorted(set(one_each)) and set(one_each) <= set(levels)
        assert len(grouped) == 2, grouped  # 2 workers
        assert sorted(g for n in grouped for g in n.split(", ")) == sorted(one_each), grouped
