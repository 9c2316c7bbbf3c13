"""`dpaudit direct` on the US spine generates the spine once, in the flow's process, and shares it
with the workers of its Dask cluster (as the audit does): no worker generates it (counted by each
process), and the errors it stores are those of the same experiment run without a cluster."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from flows.spec import parse_spec
from tests.integration._spine_share import run_sharing_the_spine

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SEED = 29  # population.seed: a spine no other test of the session generates


def test_direct_flow_shares_the_spine_and_stores_the_same_errors(
    prefect_harness: None, tmp_path: Path
) -> None:
    from prefect_dask import DaskTaskRunner

    from auditlib.simulate.direct import release_range
    from flows.experiments.direct_loss import direct_flow
    from flows.experiments.direct_runs import SpecDirectParams

    spec = parse_spec(
        {
            "audit": {"allocation": "pl94_2021_production", "region": "PR", "seed": 3},
            "population": {"kind": "spine", "seed": SEED},
            "release": {"kind": "topdown"},
        }
    ).to_toml()
    params = SpecDirectParams(
        spec=spec, change="add", to_block=2, geolevel="Tract", unit=0,
        replicates=40, chunk=10, stream_chunk=20, seed=7,
    )  # fmt: skip

    def run(address: str) -> dict:
        flow = direct_flow.with_options(task_runner=DaskTaskRunner(address=address))
        return flow(str(tmp_path / "dask.zarr"), params)

    summary = run_sharing_the_spine(run, f"dpaudit-spine-PR-{SEED}-")
    assert summary["computed"] == 4

    # the same experiment in this process, without a cluster (each chunk builds D itself)
    direct_flow(str(tmp_path / "local.zarr"), params)
    shared, local = (
        xr.open_zarr(str(tmp_path / f"{w}.zarr"), group="direct", consolidated=False)[
            "error"
        ].values
        for w in ("dask", "local")
    )
    np.testing.assert_array_equal(shared, local)
    # and the library's released values of that experiment, minus the truth of D
    from flows.experiments.direct_runs import spec_experiment

    e = spec_experiment(params)
    d, dp = release_range(
        e.pair, e.release, level=e.level, unit=e.unit, query=e.query, cell=e.cell,
        start=0, stop=40, replicates=40, seed=7, chunk=20,
    )  # fmt: skip
    truth = e.truth()[0]
    np.testing.assert_array_equal(shared, np.stack([d - truth, dp - truth]))
