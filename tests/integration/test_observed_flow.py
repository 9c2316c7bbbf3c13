"""A published release audited as released: `dpaudit run` on release.kind = "observed" (no
simulation), its residuals, EPL and the declared allocation's accounting; bad tables exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from storage import schema as S
from storage import store
from tests._ceilings import PROCESS_CEILING_S
from tests.integration._residuals import padded

pytestmark = pytest.mark.integration

EPS = 0.5
RUNS = 30


def write_release(tmp_path: Path) -> tuple[Path, pd.DataFrame]:
    """60 counties in 3 states; RUNS published runs of two-sided geometric noise at EPS, the first
    two in the truth's table, the others one file each."""
    rng = np.random.default_rng(7)
    n = 60
    df = pd.DataFrame(
        {"State": [f"S{i // 20}" for i in range(n)], "County": [f"C{i:02d}" for i in range(n)]}
    )
    df["persons"] = 100 + 7 * np.arange(n)
    p = 1 - np.exp(-EPS)
    for r in range(RUNS):
        df[f"dp{r}"] = df["persons"] + rng.geometric(p, n) - rng.geometric(p, n)
    df.to_csv(tmp_path / "counties.csv", index=False)
    spec = tmp_path / "observed.toml"
    cols = ", ".join(f'["dp{r}"]' for r in range(RUNS))
    spec.write_text(
        '[population]\nkind = "table"\npath = "counties.csv"\ncounts = ["persons"]\n'
        'levels = ["State"]\nunit = "County"\n'
        f'[release]\nkind = "observed"\npublished = [{cols}]\n'
        "[accounting]\ndeltas = [1e-10]\ncomposed = false\neps_grid_points = 20\n"
    )
    return spec, df


def dpaudit() -> list[str]:
    exe = Path(sys.executable).with_name("dpaudit")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "flows.cli"]


def run_cli(spec: Path, url: Path, dask_address: str, cwd: Path) -> subprocess.CompletedProcess:
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    cmd = [*dpaudit(), "run", str(spec), "--store", str(url), "--no-report"]
    cmd += ["--scheduler", dask_address]
    return subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=PROCESS_CEILING_S
    )


def test_dpaudit_run_audits_published_counts(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    spec, df = write_release(tmp_path)
    url = tmp_path / "obs.zarr"
    done = run_cli(spec, url, dask_address, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert store.root_attrs(str(url))["release"] == "observed"
    assert store.root_attrs(str(url))["published_runs"] == RUNS
    res = padded(str(url))
    assert list(res.geolevel.values) == ["All", "State", "County"]
    assert res.sizes["replicate"] == RUNS  # one replicate per published run: nothing simulated
    n = res.n_items.values[0]
    assert list(n) == [1, 3, 60]
    # the stored residuals are the table's published minus true counts, run by run
    pub = df[[f"dp{r}" for r in range(RUNS)]].to_numpy().T
    want = pub - df["persons"].to_numpy()[None, :]
    np.testing.assert_array_equal(res.residual.values[0, 2, :, :60], want)
    by_state = df.groupby("State").sum(numeric_only=True)
    state_res = (
        by_state[[f"dp{r}" for r in range(RUNS)]].to_numpy() - by_state[["persons"]].to_numpy()
    ).T
    np.testing.assert_array_equal(res.residual.values[0, 1, :, :3], state_res)
    # EPL of geometric noise at EPS: its interval covers EPS, well below twice of it
    epl = store.open_group(str(url), S.EPL).sel(geolevel="County", query="total")
    assert float(epl.epl_ci_low) <= EPS <= float(epl.epl_ci_high)
    assert float(epl.epl_ci_high) < 2 * EPS
    # beside it, the declared allocation's exact accounting at each of its levels
    acct = store.open_group(str(url), S.ACCOUNTING)
    assert list(acct.geolevel.values)[:3] == ["US", "State", "County"]
    state_eps = float(acct.eps_exact_upper.sel(geolevel="State", delta=1e-10))
    assert round(state_eps, 4) == 9.6009  # REFERENCE.md: State 9.600900 @1e-10
    assert S.ACCURACY not in store.groups(str(url))  # nothing simulated, no simulated errors
    # the declared DHC allocation's last level (Block: discrete Gaussian σ² of hundreds) is taken
    # as measured at the rows; their geometric noise of variance 7.8 refutes it, and the other
    # declared levels hold no counts of their own
    claims = store.open_group(str(url), S.CLAIMS)
    assert claims.attrs["basis"] == "observed" and claims.attrs["n_tests"] == 3
    verdict = dict(zip(claims.geolevel.values, claims.claim_verdict.values, strict=True))
    assert verdict.pop("Block") == "refuted"
    assert set(verdict.values()) == {"undecided"}
    evidence = json.loads(str(claims.claim_evidence.sel(geolevel="Block").values))
    assert evidence["measured_at"] == "County" and evidence["n"] == 60 * RUNS


@pytest.mark.slow
def test_a_published_release_declared_truly_reads_consistent(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    """The same release declared as what it is (geometric scale 1/EPS at the table's counties):
    consistent, its ε interval holding EPS. The refutation of a false declaration on the same
    residuals is the test above (and tests/unit/test_claims.py for half claims)."""
    spec, _ = write_release(tmp_path)
    (tmp_path / "declared.csv").write_text(
        f"geolevel,query,cells,mechanism,scale,neighbours\nCounty,total,1,geometric,{1 / EPS},"
        "add_remove\n"
    )
    spec.write_text('[audit]\nallocation = "declared.csv"\n' + spec.read_text())
    url = tmp_path / "true.zarr"
    done = run_cli(spec, url, dask_address, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    claims = store.open_group(str(url), S.CLAIMS)
    assert list(claims.geolevel.values) == ["County"]
    assert str(claims.claim_verdict.values[0]) == "consistent", claims.claim_sentence.values[0]
    lo, hi = json.loads(str(claims.claim_evidence.values[0]))["eps_interval"]
    assert lo <= EPS <= hi < 2 * EPS


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda d: d.drop(columns=["dp3"]), ["Missing columns ['dp3']"]),
        (lambda d: d.assign(dp4=d["dp4"].where(d.index != 9)), ["'dp4'", "row 9", "missing"]),
        (
            lambda d: d.assign(dp5=d["dp5"] + np.where(d.index == 11, 0.5, 0.0)),
            ["'dp5'", "row 11", "not a whole number"],
        ),
    ],
)
def test_a_bad_published_table_exits_2_naming_row_and_column(tmp_path: Path, edit, words) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from flows.cli.app import app

    spec, df = write_release(tmp_path)
    edit(df).to_csv(tmp_path / "counties.csv", index=False)
    target = tmp_path / "bad.zarr"
    res = CliRunner().invoke(app, ["run", str(spec), "--store", str(target), "--no-report"])
    assert res.exit_code == 2, res.output
    assert res.output.startswith("dpaudit: error:") and res.output.count("\n") == 1, res.output
    for w in words:
        assert w in res.output
    assert not target.exists()


def test_a_run_file_without_a_unit_exits_2(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli.app import app

    spec, df = write_release(tmp_path)
    df[["State", "County", "persons"]].to_csv(tmp_path / "counties.csv", index=False)
    run = df[["State", "County", "dp0"]].rename(columns={"dp0": "persons"})
    run.to_csv(tmp_path / "run0.csv", index=False)
    run.drop(index=[17]).to_csv(tmp_path / "run1.csv", index=False)
    lines = spec.read_text().splitlines()
    lines = [
        'published_files = ["run0.csv", "run1.csv"]' if x.startswith("published") else x
        for x in lines
    ]
    spec.write_text("\n".join(lines) + "\n")
    target = tmp_path / "bad.zarr"
    res = CliRunner().invoke(app, ["run", str(spec), "--store", str(target), "--no-report"])
    assert res.exit_code == 2, res.output
    assert "unit ('S0', 'C17')" in res.output and "run1.csv" in res.output
    assert not target.exists()


@pytest.mark.slow
def test_a_release_declared_topdown_is_tested_against_dpaudits_own_topdown(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    """The shipped country published by TopDown at a quarter of the declared σ² (ε about twice
    the claim) and declared post-processed TopDown of pl94_2021_production: `dpaudit run` tests
    every mapped level against its own TopDown of the declaration on the same counts (one test
    per level and size class of true counts) and refutes each; the unmapped levels undecided.
    The true and conservative declarations: tests/unit/test_claims_post_processed.py."""
    from auditlib.claims.two_sample import size_class
    from tests._topdown_runs import cells, write_release

    spec = write_release(tmp_path, 0.25, 20, 7)
    spec.write_text(spec.read_text().replace("[release]\n", "[release]\nreference_runs = 40\n"))
    url = tmp_path / "half.zarr"
    done = run_cli(spec, url, dask_address, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    claims = store.open_group(str(url), S.CLAIMS)
    verdict = dict(zip(claims.geolevel.values, claims.claim_verdict.values, strict=True))
    assert verdict == {
        "US": "refuted",
        "State": "refuted",
        "County": "refuted",
        "Tract": "undecided",
        "Block_Group": "undecided",
        "Block": "refuted",
    }
    truth = pd.read_csv(tmp_path / "country.csv")
    c = cells()
    levels = [truth[c].sum().to_numpy(), truth.groupby("region")[c].sum().to_numpy()]
    levels += [truth.groupby("district")[c].sum().to_numpy(), truth[c].to_numpy()]
    m = sum(len(np.unique(size_class(t.ravel()))) for t in levels)
    assert claims.attrs["n_tests"] == m and "Mann–Whitney" in claims.attrs["rule"]
    evidence = json.loads(str(claims.claim_evidence.sel(geolevel="County").values))
    assert evidence["measured_at"] == "district" and evidence["reference_runs"] == 40
    assert evidence["p_value"] < 0.05 / m == pytest.approx(evidence["threshold"])
    # the CLI's table says it, with where each declared level was measured
    assert "refuted" in done.stdout and "County at district" in done.stdout
