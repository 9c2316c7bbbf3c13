"""`dpaudit account --method/--epsilon`, `dpaudit calibrate` and `dpaudit tradeoff`."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli.app import app

runner = CliRunner()


def run_json(args: list[str]) -> dict:
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def state(out: dict) -> dict:
    return next(lv for lv in out["levels"] if lv["geolevel"] == "State")


def test_account_default_keys_unchanged() -> None:
    out = run_json(["account", "-l", "State", "-d", "1e-11", "--no-composed"])
    e = state(out)["epsilon"][0]
    assert set(e) == {"delta", "exact", "exact_lower", "exact_upper", "bureau", "cks"}
    assert e["exact"] == pytest.approx(10.125417, abs=1e-5)
    assert "composed" not in out


@pytest.mark.parametrize(
    ("method", "key", "value"),
    [
        ("exact", "exact", 10.125417),
        ("zcdp-simple", "bureau", 11.066),
        ("zcdp-cks", "cks", None),
        ("paper-bound", "paper_bound", None),
    ],
)
def test_account_methods(method: str, key: str, value: float | None) -> None:
    out = run_json(["account", "-m", method, "-l", "State", "-d", "1e-11", "--no-composed"])
    assert out["method"] == method
    e = state(out)["epsilon"][0]
    if value is not None:
        assert e[key] == pytest.approx(value, abs=2e-3)
    if method == "paper-bound":
        # delta <= P[L > eps] is an upper bound on delta: its eps is above the exact one
        assert e["paper_bound_lower"] > 10.125417 and e["paper_bound"] < e["bureau"]
    if method.startswith("zcdp"):
        assert "exact" not in e and state(out)["method"] == method


def test_account_bracket_mode_on_request() -> None:
    out = run_json(["account", "-m", "bracket", "-l", "Block", "-d", "1e-11", "--no-composed"])
    block = out["levels"][0]
    assert block["method"] == "bracket-grid"
    e = block["epsilon"][0]
    exact = run_json(["account", "-m", "exact", "-l", "Block", "-d", "1e-11", "--no-composed"])
    x = exact["levels"][0]["epsilon"][0]
    assert x["exact"] == pytest.approx(0.917830, abs=5e-7)  # REFERENCE.md, 6 digits
    assert e["exact_lower"] <= x["exact_lower"] <= x["exact_upper"] <= e["exact_upper"]
    assert e["exact_upper"] - e["exact_lower"] < 1e-6


def test_account_split_grid_trades_width_for_work() -> None:
    """A coarser σ² split gives a wider bracket that still holds the exact lattice's value."""
    args = ["account", "-m", "bracket", "-l", "Block", "-d", "1e-11", "--no-composed"]
    coarse = run_json([*args, "--split-grid", str(2.0**-6)])["levels"][0]["epsilon"][0]
    default = run_json(args)["levels"][0]["epsilon"][0]
    exact = run_json(["account", "-m", "exact", "-l", "Block", "-d", "1e-11", "--no-composed"])
    x = exact["levels"][0]["epsilon"][0]
    assert coarse["exact_lower"] <= x["exact_lower"] <= x["exact_upper"] <= coarse["exact_upper"]
    width = coarse["exact_upper"] - coarse["exact_lower"]
    assert width > 10 * (default["exact_upper"] - default["exact_lower"])


def test_account_delta_of_epsilon() -> None:
    out = run_json(["account", "-l", "State", "-e", "10.125417", "--no-composed"])
    assert out["epsilons"] == [10.125417] and out["deltas"] == []
    e = state(out)["delta"][0]
    assert e["exact"] == pytest.approx(1e-11, rel=1e-4)
    assert e["exact_lower"] <= e["exact_upper"]
    assert e["bureau"] > e["cks"] > e["exact"]
    res = runner.invoke(app, ["account", "-l", "State", "-e", "10", "--no-composed"])
    assert res.exit_code == 0 and "exact δ" in res.stdout


def test_account_cumulative_rows_and_totals() -> None:
    """PL94 + DHC, zCDP conversion only (fast): rows, rho totals of REFERENCE.md, and the PL94
    persons certificate's CKS eps(1e-10) = 17.14. Repeating --allocation implies --cumulative."""
    out = run_json(["account", "--cumulative", "-m", "zcdp-cks", "-d", "1e-10"])
    rows = {r["geolevel"]: r for r in out["levels"]}
    assert list(rows) == [
        "pl94_2021_production persons",
        "pl94_2021_production units",
        "pl94_2021_production persons+units",
        "dhc_2023_production persons",
        "dhc_2023_production units",
        "dhc_2023_production persons+units",
        "all products composed",
    ]
    assert rows["pl94_2021_production persons"]["rho"] == pytest.approx(293764 / 114921)
    assert rows["pl94_2021_production persons"]["epsilon"][0]["cks"] == pytest.approx(
        17.14, abs=5e-3
    )
    assert rows["pl94_2021_production persons+units"]["rho"] == pytest.approx(2.63, abs=5e-3)
    assert rows["dhc_2023_production persons+units"]["rho"] == pytest.approx(12.66, abs=5e-3)
    assert rows["all products composed"]["rho"] == pytest.approx(2.6312 + 12.6627, abs=1e-3)
    again = run_json(
        ["account", "-a", "pl94_2021_production", "-a", "dhc_2023_production", "-m", "zcdp-cks"]
    )
    assert [r["geolevel"] for r in again["levels"]] == list(rows)


def test_account_cumulative_exact_dhc() -> None:
    """DHC persons + units compose exactly (one common lattice step): composing can only add
    loss, so the composed eps exceeds each universe's, and stays below the CKS conversion."""
    out = run_json(["account", "-a", "dhc_2023_production", "--cumulative", "-d", "1e-10"])
    rows = {r["geolevel"]: r["epsilon"][0] for r in out["levels"]}
    both = rows["dhc_2023_production persons+units"]
    assert out["levels"][-1]["method"] == "exact-lattice"
    assert both["exact_upper"] - both["exact_lower"] < 1e-9
    for u in ("persons", "units"):
        assert both["exact_lower"] > rows[f"dhc_2023_production {u}"]["exact_upper"]
    assert both["exact_upper"] < both["cks"] < both["bureau"]


def test_calibrate_levels_and_common_factor() -> None:
    out = run_json(["calibrate", "-d", "1e-11", "-l", "State", "-l", "Block", "--no-composed"])
    st = state(out)
    assert round(st["reduced_sigma2_lower"], 2) == 4.25 == round(st["reduced_sigma2_upper"], 2)
    assert round(100 * st["variance_cut_lower"], 2) == 15.08
    block = out["levels"][1]
    assert round(block["reduced_sigma2_lower"], 2) == 343.27
    assert "composed" not in out
    out = run_json(["calibrate", "-d", "1e-10", "-l", "US", "-m", "paper-bound", "-t", "21.97"])
    comp = out["composed"]
    assert comp["target_epsilon"] == 21.97 and comp["method"] == "paper-bound"
    assert round(100 * comp["variance_cut_upper"], 2) == 8.59
    assert "reduced_sigma2_lower" not in comp  # heterogeneous: only the factor
    res = runner.invoke(app, ["calibrate", "-l", "State", "--no-composed"])
    assert res.exit_code == 0 and "State" in res.stdout and "%" in res.stdout


def test_tradeoff_csv_json_and_file(tmp_path: Path) -> None:
    res = runner.invoke(app, ["tradeoff", "-l", "State", "--alpha", "0.05"])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(ln for ln in io.StringIO(res.stdout) if not ln.startswith("#")))
    assert len(rows) == 1
    assert float(rows[0]["beta_lower"]) == pytest.approx(0.591, abs=5e-4)
    assert float(rows[0]["beta_bureau"]) == pytest.approx(0.031, abs=5e-4)
    target = tmp_path / "curve.json"
    res = runner.invoke(
        app, ["tradeoff", "-l", "Block", "--points", "11", "-f", "json", "-o", str(target)]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(target.read_text())
    assert len(data["alpha"]) == 11 and data["geolevel"] == "Block"
    assert all(lo <= hi for lo, hi in zip(data["beta_lower"], data["beta_upper"], strict=True))
    assert data["gdp_mu_estimate"] > 0


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["account", "-e", "-1"], "Invalid epsilon: -1.0"),
        (["account", "-e", "1", "-d", "1e-5"], "either --delta"),
        (["account", "-m", "fft"], "fft"),
        (
            [
                "account",
                "-a",
                "pl94_2021_production",
                "-n",
                "bounded",
                "-m",
                "exact",
                "-l",
                "State",
            ],
            "no exact lattice within budget",
        ),
        (["account", "--cumulative", "-l", "State"], "drop --level"),
        (["account", "--split-grid", "0.3"], "Invalid --split-grid 0.3"),
        (["account", "--split-grid", "nan"], "Invalid --split-grid nan"),
        (["account", "--max-work", "0"], "Invalid --max-work 0.0"),
        (["account", "-a", "pl94_2021_production", "-a", "nope"], "Unknown allocation: 'nope'"),
        (["account", "--cumulative", "--region", "XX", "-m", "zcdp-cks"], "Unknown region: 'XX'"),
        (["calibrate", "-t", "abc"], "Invalid target: 'abc'"),
        (["calibrate", "-t", "-3"], "Invalid target: '-3'"),
        (["calibrate", "-d", "1.5"], "Invalid delta: 1.5"),
        (["calibrate", "-l", "Tract"], "Unknown geolevel: 'Tract'"),
        (["tradeoff", "--alpha", "1.5"], "Invalid alpha: 1.5"),
        (["tradeoff", "--points", "1"], "Invalid points: 1"),
        (["tradeoff", "--points", "3", "--alpha", "0.1"], "either --alpha"),
        (["tradeoff", "-l", "Tract"], "Unknown geolevel: 'Tract'"),
        (["tradeoff", "-o", "/nonexistent-dir/x.csv"], "Invalid output"),
    ],
)
def test_bad_input_exit_2(args: list[str], pattern: str) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert pattern in res.stderr
    if not args[-1] == "fft":
        assert len(res.stderr.strip().splitlines()) == 1


def test_tradeoff_csv_says_its_columns_and_keeps_the_bracket_certified(tmp_path: Path) -> None:
    """CSV: a '# columns:' line, values of at most 12 significant digits (an even grid reads 0.3,
    not 0.30000000000000004), the bounds rounded outward from the full-precision JSON values."""
    args = ["tradeoff", "-l", "State", "--points", "11"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    first, header, *body = res.stdout.strip().splitlines()
    assert first.startswith("# columns: alpha = type I error; beta_lower <= beta(alpha)")
    assert header == "alpha,beta_lower,beta_upper,beta_bureau"
    rows = [[float(v) for v in row.split(",")] for row in body]
    assert [r[0] for r in rows] == [i / 10 for i in range(11)]
    assert "0.30000000000000004" not in res.stdout
    for text in ",".join(body).split(","):
        assert len(text.lstrip("-0.").split("e")[0].replace(".", "")) <= 12, text
    full = json.loads(runner.invoke(app, [*args, "-f", "json"]).stdout)
    for r, lo, hi, bz in zip(
        rows, full["beta_lower"], full["beta_upper"], full["beta_bureau"], strict=True
    ):
        assert r[1] <= lo and r[2] >= hi  # still a certified bracket
        assert r[1] == pytest.approx(lo, rel=1e-11, abs=1e-300)
        assert r[2] == pytest.approx(hi, rel=1e-11, abs=1e-300)
        assert r[3] == pytest.approx(bz, rel=1e-11, abs=1e-300)
    # a file gets the same text
    target = tmp_path / "c.csv"
    assert runner.invoke(app, [*args, "-o", str(target)]).exit_code == 0
    assert target.read_text() == res.stdout
    again = runner.invoke(app, [*args, "-o", str(target)])
    assert again.exit_code == 2 and "already exists; pass --overwrite" in again.stderr
    assert runner.invoke(app, [*args, "-o", str(target), "--overwrite"]).exit_code == 0


def test_tradeoff_help_states_the_accountants_bound() -> None:
    from auditlib.accounting.tradeoff import MAX_TRADEOFF_POINTS
    from flows.cli.tradeoff import MAX_POINTS

    assert MAX_POINTS == MAX_TRADEOFF_POINTS
    res = runner.invoke(app, ["tradeoff", "--help"], env={"COLUMNS": "200"})
    assert f"2..{MAX_TRADEOFF_POINTS} points" in " ".join(res.stdout.split())
