"""Simulations of an allocation file with other noise than the discrete Gaussian: every query draws
its declared mechanism (two-sided geometric, Laplace, Gaussian), TopDown weights each measurement
by its variance, and the audit's accounting composes the mixed mechanisms (zCDP conversions n/a
where a query is pure ε-DP)."""

from __future__ import annotations

import math
import pickle
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from auditlib import seeds
from auditlib.accounting import GeometricLoss, LaplaceLoss, PrivacyLossComposition
from auditlib.allocations import load_allocation
from auditlib.simulate.noise import NoiseVariance
from auditlib.simulate.synthetic import simulate_synthetic_block
from auditlib.simulate.topdown import TOTAL_QUERIES, StateHierarchy, topdown
from auditlib.summaries import account_components
from flows.spec import load_spec
from flows.spec.plan import make_plan
from tests.integration._specs import with_allocation_file

MIXED = (
    "geolevel,query,cells,mechanism,sigma2,scale,sigma,neighbours\n"
    "State,total,1,discrete_gaussian,4,,,add_remove\n"
    "County,total,1,geometric,,3,,add_remove\n"
    "County,sex,2,laplace,,2,,add_remove\n"
    "Block,total,1,gaussian,,,1.5,add_remove\n"
)


def _geometric_variance(b: float) -> float:
    """Σ k² P(k) of P(k) ∝ e^(−|k|/b), summed directly."""
    k = np.arange(-2000, 2001)
    w = np.exp(-np.abs(k) / b)
    return float((k * k * w).sum() / w.sum())


def test_noise_variance_is_the_laws_variance_and_pickles() -> None:
    g = NoiseVariance("geometric", 3.0)
    assert float(g) == pytest.approx(_geometric_variance(3.0), rel=1e-12)
    assert float(NoiseVariance("laplace", 2.0)) == 8.0
    assert float(NoiseVariance("gaussian", 1.5)) == 2.25
    back = pickle.loads(pickle.dumps(g))
    assert isinstance(back, NoiseVariance) and (back.mechanism, back.parameter) == ("geometric", 3)


def _plan(tmp_path: Path):
    (tmp_path / "mine.csv").write_text(MIXED, encoding="utf-8")
    (tmp_path / "spec.toml").write_text(
        '[audit]\nallocation = "mine.csv"\nreplicates = 400\n'
        "[population]\nstates = 1\nfanout = { County = 30, Block = 4 }\n",
        encoding="utf-8",
    )
    return make_plan(load_spec(tmp_path / "spec.toml"))


def test_the_allocation_release_draws_each_querys_mechanism(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    assert plan.geolevels == ("State", "County", "Block")
    s2 = plan.sigma2_matrix()  # the stored sigma2: each query's noise variance
    qi = {q: i for i, q in enumerate(plan.queries)}
    assert s2[0, qi["total"]] == 4.0 and s2[1, qi["sex"]] == 8.0 and s2[2, qi["total"]] == 2.25
    assert s2[1, qi["total"]] == pytest.approx(_geometric_variance(3.0), rel=1e-12)

    gi = plan.geolevels.index("County")
    block = simulate_synthetic_block(
        hierarchy=plan.hierarchy,
        params=plan.population,
        state=1,
        geolevel="County",
        geolevel_index=gi,
        queries=plan.level_queries[gi],
        replicates=plan.replicates,
        noise_seed=plan.noise_seed,
    )
    res = block.residual.astype(float)
    geo = res[:, block.query_index == qi["total"]].ravel()
    lap = res[:, block.query_index == qi["sex"]].ravel()
    assert np.array_equal(geo, np.round(geo))  # two-sided geometric: integers
    assert not np.array_equal(lap, np.round(lap))  # Laplace: reals
    # variances within 5 % (12,000 and 24,000 draws) and the Laplace's excess kurtosis 3
    assert geo.var() == pytest.approx(_geometric_variance(3.0), rel=0.05)
    assert lap.var() == pytest.approx(8.0, rel=0.05)
    assert stats.kurtosis(lap) == pytest.approx(3.0, abs=0.6)
    # the Laplace law itself, not a Gaussian of its variance
    assert stats.kstest(lap, stats.laplace(scale=2.0).cdf).pvalue > 1e-3


def test_topdown_weights_each_measurement_by_its_variance() -> None:
    """Two children measured with Laplace noise of scale b under an exact parent total: the
    unrounded least-squares child is its truth plus (e₁ − e₂)/2, variance b² and excess kurtosis
    3/2 (a discrete Gaussian of the same variance would give half-integers and kurtosis ~0).
    A child measured once more with Gaussian noise of a far larger variance barely moves."""
    hier = StateHierarchy.from_fanouts(("State", "County"), (2,))
    hist = np.array([[500], [300]])
    b = 3.0
    measured = [[("total", 1.0)], [("total", NoiseVariance("laplace", b))]]
    dev = []
    for r in range(3000):
        rngs = [seeds.rng(11, 99, 1, i, r) for i in range(2)]
        rel = topdown(hier, hist, TOTAL_QUERIES, measured, rngs, rounding="none")
        dev.append(rel.dp[1][0, 0] - 500)
    d = np.asarray(dev)
    assert d.var() == pytest.approx(b * b, rel=0.08)
    assert stats.kurtosis(d) == pytest.approx(1.5, abs=0.5)
    assert not np.allclose(2 * d, np.round(2 * d))


def test_audit_accounting_of_a_mixed_file(tmp_path: Path) -> None:
    (tmp_path / "mine.csv").write_text(MIXED, encoding="utf-8")
    alloc = load_allocation(str(tmp_path / "mine.csv"))
    county = alloc.accounting_components("add_remove", geolevel="County")
    assert county == [GeometricLoss(Fraction(1, 3), 1), LaplaceLoss(2, 1)]  # one cell moved each
    assert alloc.accounting_components("add_remove", geolevel="State") == [(4, 1)]
    alpha = np.linspace(0, 1, 11)
    out = account_components(county, [1e-6], np.linspace(0, 2, 5), alpha, 1e-6)
    ref = PrivacyLossComposition(county).epsilon(1e-6)
    assert float(out["eps_exact_upper"][0]) == pytest.approx(float(ref.upper), abs=1e-12)
    # pure eps-DP: at most 1/3 + 1/2, and the zCDP they give is eps0^2 / 2 per release
    assert float(out["eps_exact_upper"][0]) <= 1 / 3 + 1 / 2 + 1e-9
    assert out["rho"] == pytest.approx((1 / 3) ** 2 / 2 + (1 / 2) ** 2 / 2)
    assert np.isnan(out["eps_bureau"]).all() and np.isnan(out["tradeoff_bureau"]).all()
    assert "pure eps-DP" in out["bureau_na"]
    assert "calibration_factor_upper" not in out
    # a Gaussian level keeps the zCDP conversions: Gaussian noise is zCDP
    block = account_components(
        alloc.accounting_components("add_remove", geolevel="Block"),
        [1e-6],
        np.linspace(0, 2, 5),
        alpha,
    )
    assert block["eps_bureau"][0] == pytest.approx(
        1 / (2 * 2.25) + 2 * math.sqrt(1 / (2 * 2.25) * math.log(1e6))
    )
    assert "bureau_na" not in block


def test_sweep_of_a_mixed_file(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli.app import app
    from flows.experiments.sweep import job_components, plan_jobs, sweep_dataset

    path = tmp_path / "mine.csv"
    path.write_text(MIXED, encoding="utf-8")
    jobs = plan_jobs([str(path)], ["add_remove"])
    grid = np.linspace(0, 2, 5)
    results = [account_components(job_components(j), [1e-6], grid) for j in jobs]
    ds = sweep_dataset(jobs, results, [1e-6], grid)
    county = ds.isel(job=int(np.flatnonzero(ds.geolevel.values == "County")[0]))
    ref = PrivacyLossComposition([GeometricLoss(Fraction(1, 3)), LaplaceLoss(2)]).epsilon(1e-6)
    assert float(county.eps_exact_upper[0]) == pytest.approx(float(ref.upper), abs=1e-12)
    assert np.isnan(float(county.eps_bureau[0]))
    assert str(county.allocation.values).startswith("mine.csv@sha256:")  # no path
    state = ds.isel(job=int(np.flatnonzero(ds.geolevel.values == "State")[0]))
    assert np.isfinite(float(state.eps_bureau[0]))  # discrete Gaussian: zCDP
    # the command takes the file (it fails later, on the unreachable scheduler)
    args = ["sweep", "-a", str(path), "-n", "add_remove", "--scheduler", "tcp://127.0.0.1:9"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and "noise" not in res.stderr and "127.0.0.1:9" in res.stderr


@pytest.mark.parametrize(("geolevel", "variance", "integer"), [("County", None, True),
                                                                ("Block", 2.25, False)])  # fmt: skip
def test_direct_estimate_draws_the_files_noise(
    tmp_path: Path, geolevel: str, variance: float | None, integer: bool
) -> None:
    """`dpaudit direct --spec` of an allocation release: the released cell carries the noise
    its query declares (County: geometric of scale 3; Block: Gaussian of σ = 1.5)."""
    from auditlib.simulate.direct import Allocation, TopDown, released_values
    from flows.experiments.direct_runs import SpecDirectParams, spec_experiment

    text = with_allocation_file(
        tmp_path, MIXED, "[population]\nstates = 1\nfanout = { County = 3, Block = 2 }\n"
    )
    spec = tmp_path / "spec.toml"
    e = spec_experiment(SpecDirectParams(spec=text, change="add", to_block=1, geolevel=geolevel))
    assert isinstance(e.release, Allocation) and isinstance(e.release.sigma2, NoiseVariance)
    v = released_values(
        e.release, e.pair.d, 6000, seeds.rng(5, 1), level=e.level, unit=e.unit, query=e.query
    )
    err = v - e.truth()[0]
    assert np.array_equal(err, np.round(err)) is integer
    want = _geometric_variance(3.0) if variance is None else variance
    assert err.var() == pytest.approx(want, rel=0.07)
    # the TopDown release keeps each measurement's own noise too
    spec.write_text(spec.read_text() + '[release]\nkind = "topdown"\n', encoding="utf-8")
    td = spec_experiment(SpecDirectParams(spec=load_spec(spec).to_toml(), change="add",
                                          to_block=1))  # fmt: skip
    assert isinstance(td.release, TopDown)
    assert any(isinstance(s, NoiseVariance) for lv in td.release.measured for _, s in lv)


def test_run_summary_and_report_say_n_a_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    import xarray as xr

    from auditlib.summaries import BUREAU_NA
    from flows.cli.summary import print_headline_table
    from flows.report.accounting import accounting_section

    nan = float("nan")
    acc = xr.Dataset(
        {
            "rho": ("geolevel", [0.5, 1.0]),
            "sigma2_min": ("geolevel", [2.0, 8.0]),
            "sigma2_max": ("geolevel", [2.0, 17.8]),
            "n_queries": ("geolevel", [1, 2]),
            "eps_bureau": (("geolevel", "delta"), [[3.5], [nan]]),
            "eps_cks": (("geolevel", "delta"), [[3.2], [nan]]),
            "eps_exact_lower": (("geolevel", "delta"), [[3.0], [0.8333]]),
            "eps_exact_upper": (("geolevel", "delta"), [[3.0], [0.8334]]),
            "composed_rho": ((), 1.5),
            "composed_eps_bureau": ("delta", [nan]),
            "composed_eps_cks": ("delta", [nan]),
            "composed_eps_exact_lower": ("delta", [4.0]),
            "composed_eps_exact_upper": ("delta", [4.0]),
        },
        coords={"geolevel": ["State", "County"], "delta": [1e-10]},
        attrs={"headline_delta": 1e-10, "bureau_na": BUREAU_NA},
    )
    print_headline_table(acc)
    out = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split() for line in out[1:]}
    assert rows["State"][2] == "3.5" and rows["County"][2] == "n/a"
    note = out[out.index(next(x for x in out if x.startswith("Bureau eps n/a"))) :]
    assert " ".join(x.strip() for x in note) == f"Bureau eps {BUREAU_NA}"  # wrapped, 80 columns
    assert all(len(x) <= 80 for x in out)
    sec = accounting_section(acc)
    county = next(r for r in sec.rows if r["geolevel"] == "County")
    assert county["cells"][0]["bureau"] == "n/a" and county["cells"][0]["cks"] == "n/a"
    assert "pure eps-DP" in sec.summary
