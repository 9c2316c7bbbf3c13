"""The US spine of a run is generated once, in the flow's process, and shared with the workers of
its Dask cluster: no worker generates it (counted by each process), and the published copy is gone
when the flow ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.spec import parse_spec
from tests.integration._spine_share import run_sharing_the_spine

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SEED = 23  # population.seed: a spine no other test of the session generates


def test_workers_read_the_flows_spine_and_never_generate_it(
    prefect_harness: None, tmp_path: Path
) -> None:
    from prefect_dask import DaskTaskRunner

    from flows.audit.flow import audit_flow, run_id_for

    s = parse_spec(
        {
            "audit": {"allocation": "pl94_2021_production", "replicates": 1, "seed": 5},
            "population": {"kind": "spine", "seed": SEED, "spine_states": ["ST08", "ST45"]},
            "release": {"kind": "topdown"},
            "accounting": {"deltas": [1e-10], "eps_grid_points": 20, "composed": False},
            "cluster": {"n_workers": 2, "tasks_per_worker": 1},
        }
    )

    def run(address: str) -> dict:
        flow = audit_flow.with_options(task_runner=DaskTaskRunner(address=address))
        return flow(s, str(tmp_path / "spine.zarr"), run_id_for(s))

    summary = run_sharing_the_spine(run, f"dpaudit-spine-US-{SEED}-")
    assert summary["blocks"] == 1 + 2 * 5  # the nation + 2 states x 5 levels
