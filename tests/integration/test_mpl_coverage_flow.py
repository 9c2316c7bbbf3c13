"""A small MPL coverage self-test on the cluster (Askin, Kutta & Dette §V design, reduced sizes, same N/n)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from auditlib.mpl.coverage import coverage_chunk
from storage import store

pytestmark = pytest.mark.integration


def test_coverage_flow_on_dask(prefect_harness: None, dask_address: str, tmp_path: Path) -> None:
    from prefect_dask import DaskTaskRunner

    from flows.experiments.mpl_coverage import GROUP, mpl_coverage_flow

    url = str(tmp_path / "mpl.zarr")
    flow = mpl_coverage_flow.with_options(task_runner=DaskTaskRunner(address=dask_address))
    kw = {"n": 5_000, "n_confidence": 12_500, "alpha": 0.05, "seed": 5}
    out = flow(url, ["laplace", "laplace_broken"], [0.7], 40, chunk=20, **kw)
    assert out == {"cells": 2, "tasks": 4, "computed": 4, "resumed": 0}
    assert store.groups(url) == [GROUP]  # the per-chunk parts are assembled, then removed
    store.finalize(url)
    ds = store.open_group(url, GROUP)
    assert ds.lb.dims == ("mechanism", "epsilon0", "rep") and ds.sizes["rep"] == 40
    ok = ds.sel(mechanism="laplace", epsilon0=0.7)
    broken = ds.sel(mechanism="laplace_broken", epsilon0=0.7)
    # correct mechanism: P(LB <= eps*_C) ~ 1 - alpha (40 reps: allow 3 sd of a binomial)
    assert float(ok.coverage) >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / 40)
    # broken mechanism (true eps = 1.4, claims 0.7): caught in most repetitions
    assert float(broken.epsilon) == pytest.approx(1.4)
    assert float(broken.exceeds_claim) >= 0.9
    # the flow's bounds are the pure function's, whatever the chunking and the workers
    direct = coverage_chunk("laplace", 0.7, 0, 40, cell=(0, 0), **kw)["lb"]
    np.testing.assert_array_equal(ok.lb.values, direct)
