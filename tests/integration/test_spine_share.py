"""The US spine of a run is generated once, in the flow's process, and shared with the workers of
its Dask cluster: no worker generates it (counted by each process), and the published copy is gone
when the flow ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.spec import parse_spec

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SEED = 23  # population.seed: a spine no other test of the session generates


def _generated() -> int:
    from flows.spec.sources import spines_generated

    return spines_generated()


def _fetched() -> list[str]:
    from flows.audit import spine_share

    return sorted(spine_share._fetched)


def test_workers_read_the_flows_spine_and_never_generate_it(
    prefect_harness: None, tmp_path: Path
) -> None:
    from distributed import Client, LocalCluster
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
    before = _generated()
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        flow = audit_flow.with_options(
            task_runner=DaskTaskRunner(address=cluster.scheduler_address)
        )
        summary = flow(s, str(tmp_path / "spine.zarr"), run_id_for(s))
        assert summary["blocks"] == 1 + 2 * 5  # the nation + 2 states x 5 levels
        generated = client.run(_generated)
        fetched = client.run(_fetched)
        assert client.list_datasets() == ()  # unpublished when the flow ended
    assert _generated() - before == 1  # the flow's plan: the one generation of the run
    assert set(generated.values()) == {0}, generated  # no worker generated it
    names = {n for ns in fetched.values() for n in ns}
    assert len(names) == 1 and names.pop().startswith(f"dpaudit-spine-US-{SEED}-"), fetched
