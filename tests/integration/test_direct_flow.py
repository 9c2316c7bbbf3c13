"""The direct estimate (Flaxman 2019 §2.3) as a flow: replicate chunks on a real Dask cluster."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from auditlib.simulate.neighbours import direct_samples
from storage import store

pytestmark = pytest.mark.integration


def test_direct_flow_on_dask(prefect_harness: None, dask_address: str, tmp_path: Path) -> None:
    from prefect_dask import DaskTaskRunner

    from flows.experiments.direct_loss import GROUP, direct_flow
    from flows.experiments.direct_runs import DirectParams, neighbour_pair

    eps = 1.0
    p = DirectParams(
        people=20_000, levels=2, mean_per_location=20.0, algorithm="gdpc", epsilon=eps,
        to_leaf=500, replicates=1_600, chunk=800, seed=4, min_events=20,
    )  # fmt: skip
    url = str(tmp_path / "direct.zarr")
    out = direct_flow.with_options(task_runner=DaskTaskRunner(address=dask_address))(url, p)
    assert out["tasks"] == 2 and out["replicates"] == 1_600
    store.finalize(url)
    ds = store.open_group(url, GROUP)
    # the chunks on the workers are the keyed runs of direct_samples, in order
    ref = direct_samples(neighbour_pair(p), "gdpc", eps, level=2, unit=0, replicates=1_600, seed=4)
    np.testing.assert_array_equal(ds.error.sel(database="D").values, ref.errors[0])
    np.testing.assert_array_equal(ds.error.sel(database="D_prime").values, ref.errors[1])
    # GDPC at eps: the moved person leaves unit 0, so error' = G(eps) - 1 and every event's
    # log-ratio is within +-eps; the simultaneous lower bound stays below eps and is informative
    assert 0.3 * eps < ds.attrs["epl_lower_ge"] <= eps
    assert ds.attrs["epl_lower_eq"] <= eps
    lr, lo, hi = ds.log_ratio_eq.values, ds.low_eq.values, ds.high_eq.values
    assert lr.size >= 3 and (lo <= lr).all() and (lr <= hi).all()
    assert (np.minimum(ds.count_d_eq.values, ds.count_d_prime_eq.values) >= 20).all()
    truth = np.where(ds.k_eq.values >= 0, eps, -eps)  # log P(k)/P(k+1) of G(eps)
    assert np.mean((lo <= truth) & (truth <= hi)) >= 0.6


def test_direct_command_rejects_bad_settings_with_exit_2(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli.app import app

    runner = CliRunner()
    target = str(tmp_path / "d.zarr")
    for args, word in (
        (["--algorithm", "topdown"], "--algorithm"),
        (["--epsilon", "-1"], "--epsilon"),
        (["--people", "20000", "--levels", "2", "--mean", "20", "--to-leaf", "5000"], "--to-leaf"),
        (["--algorithm", "gdpc", "--level", "1"], "--level"),
        (["--algorithm", "rdpc", "--level", "County"], "a geolevel name needs --spec"),
        (["--reps", "0"], "--reps"),
    ):
        res = runner.invoke(app, ["direct", *args, "--store", target])
        assert res.exit_code == 2, (args, res.output)
        assert word in res.output
    assert not Path(target).exists()
