"""The accounting sweep flow on Dask: jobs per allocation/universe/region/level, one Zarr group."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.experiments.sweep import (
    ALL_UNIVERSES,
    COMPOSED,
    CUMULATIVE,
    GROUP,
    job_components,
    plan_jobs,
)
from storage import store

pytestmark = pytest.mark.integration


def test_jobs_cover_every_level_and_composition() -> None:
    jobs = plan_jobs(["pl94_2021_production"], ["add_remove"])
    # PL94: persons US 6 levels, PR 5; units US 6, PR 5; + composed per (universe, region) = 4
    # + persons+units per region = 2
    assert len(jobs) == 6 + 5 + 6 + 5 + 4 + 2
    assert {j.universe for j in jobs if j.geolevel == COMPOSED} == {
        "persons",
        "units",
        ALL_UNIVERSES,
    }
    paper = plan_jobs(["dhcp_20220825_paper"], ["add_remove", "bounded"])
    assert len(paper) == 2 * (8 + 1)  # one universe: no persons+units job
    # both released products: one cumulative job per (region, relation), every query of both
    both = plan_jobs(["pl94_2021_production", "dhc_2023_production"], ["add_remove"], levels=False)
    cumulative = [j for j in both if j.allocation == CUMULATIVE]
    assert [(j.region, j.universe) for j in cumulative] == [
        ("US", ALL_UNIVERSES),
        ("PR", ALL_UNIVERSES),
    ]
    parts = [j for j in both if j.universe == ALL_UNIVERSES and j.allocation != CUMULATIVE]
    us = [c for j in parts if j.region == "US" for c in job_components(j)]
    assert sorted(job_components(cumulative[0])) == sorted(us)


def test_sweep_flow_writes_reference_numbers(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    from prefect_dask import DaskTaskRunner

    from flows.experiments.sweep import accounting_sweep_flow

    url = str(tmp_path / "sweep.zarr")
    flow = accounting_sweep_flow.with_options(task_runner=DaskTaskRunner(address=dask_address))
    out = flow(url, ["dhcp_20220825_paper"], ["add_remove"], [1e-5, 1e-10], eps_grid_points=30)
    assert out == {"jobs": 9, "computed": 9, "resumed": 0}
    assert store.groups(url) == [GROUP]  # the per-job parts are assembled, then removed
    store.finalize(url)
    ds = store.open_group(url, GROUP)
    assert ds.sizes == {"job": 9, "delta": 2, "eps_grid": 30}
    state = ds.isel(job=(ds.geolevel == "State").values)
    # REFERENCE.md (Su, Su & Wang setting, add/remove): State 6.571647 @1e-5, 9.600900 @1e-10
    assert float(state.eps_exact_upper.sel(delta=1e-5)[0]) == pytest.approx(6.571647, abs=1e-5)
    assert float(state.eps_exact_upper.sel(delta=1e-10)[0]) == pytest.approx(9.600900, abs=1e-5)
    comp = ds.isel(job=(ds.geolevel == COMPOSED).values)
    assert float(comp.eps_exact_lower.sel(delta=1e-10)[0]) <= 20.3246897508 + 1e-9
    assert float(comp.eps_exact_upper.sel(delta=1e-10)[0]) >= 20.3246897508 - 1e-9
    assert float(comp.eps_bureau.sel(delta=1e-10)[0]) == pytest.approx(21.985, abs=5e-4)
