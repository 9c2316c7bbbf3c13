"""`dpaudit direct --spec`: the direct estimate of an audit spec's release, end to end on Dask."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from storage import store
from tests.integration._specs import to_toml

pytestmark = pytest.mark.integration

# one state: 2 counties of 2 blocks each (blocks 0, 1 in county 0; 2, 3 in county 1)
TOPDOWN = {
    "audit": {"allocation": "pl94_2021_production", "replicates": 1, "seed": 11},
    "population": {
        "states": 1,
        "fanout": {"County": 2, "Tract": 1, "Block_Group": 1, "Block": 2},
        "mean_block_population": 200.0,
        "empty_block_share": 0.0,
    },
    "release": {"kind": "topdown"},
}
EPS = 0.5  # the known ε of the GDPC of a table's rows


def invoke(args: list[str]) -> str:
    from typer.testing import CliRunner

    from flows.cli.app import app

    res = CliRunner().invoke(app, ["direct", *args])
    assert res.exit_code == 0, res.output
    return res.output


def write_table(tmp_path: Path) -> Path:
    rows = ["state,county,persons"] + [f"S{i // 10},C{i:02d},{50 + 3 * i}" for i in range(30)]
    (tmp_path / "counties.csv").write_text("\n".join(rows) + "\n")
    spec = tmp_path / "table.toml"
    spec.write_text(
        '[audit]\nseed = 3\n[population]\nkind = "table"\npath = "counties.csv"\n'
        'counts = ["persons"]\nlevels = ["state"]\nunit = "county"\n'
        f'[release]\nkind = "gdpc"\nepsilon = {EPS}\n'
    )
    return spec


def test_topdown_of_a_synthetic_spec_in_chunks(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    from auditlib.simulate.direct import TopDown, release_samples
    from flows.audit.blocks import state_population
    from flows.experiments.direct_loss import GROUP
    from flows.experiments.direct_runs import SpecDirectParams, spec_experiment
    from flows.spec import load_spec
    from flows.spec.plan import make_plan

    spec = tmp_path / "topdown.toml"
    spec.write_text(to_toml(TOPDOWN))
    url = str(tmp_path / "td.zarr")
    args = [
        "--spec", str(spec), "--change", "move", "--from-block", "1", "--to-block", "2",
        "--level", "County", "--unit", "0", "--reps", "600", "--chunk", "250",
        "--stream-chunk", "200", "--seed", "7", "--scheduler", dask_address, "--store", url,
    ]  # fmt: skip
    out = invoke(args)
    assert "TopDown of ST01/County unit 0 total[0]" in out
    ds = store.open_group(url, GROUP)
    # D is the audit's population of ST01: the plan's own draw; D′ has one person fewer in county 0
    plan = make_plan(load_spec(spec))
    _, hist = state_population(plan, 1)
    assert ds.attrs["truth_d"] == int(hist[:2].sum()) == ds.attrs["truth_d_prime"] + 1
    assert ds.attrs["change"] == "move" and ds.attrs["from_block"] == 1
    assert 'kind = "topdown"' in ds.attrs["spec"] and ds.attrs["state"] == "ST01"
    # 3 tasks of 250 replicates across streams of 200 = one run over all 600 replicates
    e = spec_experiment(
        SpecDirectParams(
            spec=load_spec(spec).to_toml(), change="move", from_block=1, to_block=2,
            geolevel="County", replicates=600, chunk=600, stream_chunk=200, seed=7,
        )
    )  # fmt: skip
    assert isinstance(e.release, TopDown)
    ref = release_samples(
        e.pair, e.release, level="County", unit=0, replicates=600, seed=7, chunk=200
    )
    np.testing.assert_array_equal(ds.error.sel(database="D").values, ref.errors[0])
    np.testing.assert_array_equal(ds.error.sel(database="D_prime").values, ref.errors[1])
    # TopDown's county counts are integers; the state total is invariant, so the county's
    # error is not identically 0 (the county is post-processed) yet small
    err = ds.error.values
    np.testing.assert_array_equal(err, np.round(err))
    assert err.std() > 0 and np.abs(err).max() < 50
    for var in ("log_ratio_eq", "low_eq", "high_eq", "count_d_ge", "count_d_prime_ge"):
        assert var in ds


def test_gdpc_of_a_table_recovers_its_epsilon(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    from auditlib.epl.direct import direct_log_ratio
    from auditlib.simulate.direct import Hierarchical, release_samples
    from flows.experiments.direct_loss import GROUP

    spec = write_table(tmp_path)
    url = str(tmp_path / "g.zarr")
    out = invoke(
        [
            "--spec", str(spec), "--change", "move", "--from-block", "0", "--to-block", "5",
            "--unit", "0", "--reps", "6000", "--chunk", "2000", "--stream-chunk", "2000",
            "--min-events", "30", "--scheduler", dask_address, "--store", url,
        ]
    )  # fmt: skip
    assert "(ε = 0.5)" in out
    ds = store.open_group(url, GROUP)
    assert ds.attrs["truth_d"] == 50 and ds.attrs["truth_d_prime"] == 49

    def loss(lr: np.ndarray, n_d: np.ndarray, n_p: np.ndarray) -> float:
        """Count-weighted mean |log P_D(e = k)/P_D′(e = k)|: ε for every k of a geometric
        mechanism whose count moved by one (Flaxman 2019 §2.3)."""
        w = np.minimum(n_d, n_p)
        return float(np.sum(w * np.abs(lr)) / np.sum(w))

    got = loss(ds.log_ratio_eq.values, ds.count_d_eq.values, ds.count_d_prime_eq.values)
    band = 0.1  # ≈ 3 standard errors at 6000 runs per database
    assert abs(got - EPS) < band
    # the tail events: max_k log P(e ≥ k)/P′(e ≥ k) = ε exactly for k ≥ 1; the simultaneous
    # lower bound stays below ε and is informative
    assert 0.6 * EPS < ds.attrs["epl_lower_ge"] <= EPS
    assert abs(ds.attrs["epl_ge"] - EPS) < band
    # power: the same statistic of a GDPC at 0.35 or 0.65 falls outside the band around 0.5
    from flows.experiments.direct_runs import SpecDirectParams, spec_experiment

    e = spec_experiment(SpecDirectParams(spec=_spec_text(spec), change="move", from_block=0,
                                         to_block=5, replicates=6000))  # fmt: skip
    for wrong in (0.35, 0.65):
        s = release_samples(
            e.pair, Hierarchical("gdpc", wrong), level=e.level, unit=0, replicates=6000, seed=1
        )
        est = direct_log_ratio(*s.errors, min_events=30)
        assert abs(loss(est.log_ratio, est.count_d, est.count_d_prime) - EPS) > band


def _spec_text(path: Path) -> str:
    from flows.spec import load_spec

    return load_spec(path).to_toml()
