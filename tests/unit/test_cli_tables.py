"""The terminal tables of ``account``, ``account --cumulative``, ``calibrate`` and ``run``: they fit
80 columns piped to a file, never truncate a level name and never print a bracket whose ends are
equal; ``run`` quotes the headline δ."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import xarray as xr
from typer.testing import CliRunner

from flows.cli.accounting_tables import Listing, fmt_relative
from flows.cli.app import app

runner = CliRunner()
EQUAL_ENDS = re.compile(r"\[([0-9.e+-]+), \1\]")


def _invoke(args: list[str], columns: int = 80) -> str:
    res = runner.invoke(app, args, env={"COLUMNS": str(columns)})
    assert res.exit_code == 0, res.output
    return res.stdout


def _names(args: list[str]) -> list[str]:
    out = json.loads(_invoke([*args, "--json"]))
    return [
        r["geolevel"] for r in [*out["levels"], *([out["composed"]] if "composed" in out else [])]
    ]


def _check(text: str, names: list[str], columns: int = 80) -> None:
    lines = text.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= columns, text
    assert "…" not in text
    assert EQUAL_ENDS.search(text) is None, text
    words = {w for line in lines for w in line.split()}
    for name in names:  # whole: on one line, or its words whole on consecutive lines
        assert any(name in line for line in lines) or all(w in words for w in name.split()), name


@pytest.mark.parametrize(
    "args",
    [
        ["account"],
        pytest.param(["account", "--cumulative"], marks=pytest.mark.slow),
        ["calibrate"],
        ["account", "-e", "1", "-e", "5"],
    ],
    ids=["account", "cumulative", "calibrate", "delta-of-epsilon"],
)
def test_tables_fit_80_columns_and_keep_level_names(args: list[str]) -> None:
    names = _names(args)
    text = _invoke(args)
    _check(text, names)
    assert "Tract_Subset_Group" in text or "pl94_2021_production persons+units" in text


@pytest.mark.slow
def test_account_prints_the_certified_digits() -> None:
    text = _invoke(["account", "--delta", "1e-10"])
    state = next(line for line in text.splitlines() if line.startswith("State"))
    assert "9.6009" in state.split()  # Su, Su & Wang / REFERENCE.md: State 9.600900 at 1e-10
    # the cumulative PL94 persons + units bracket is narrower than four decimals: one number
    text = _invoke(["account", "--cumulative", "--delta", "1e-10"])
    out = json.loads(_invoke(["account", "--cumulative", "--delta", "1e-10", "--json"]))
    row = next(r for r in out["levels"] if r["geolevel"].endswith("persons+units"))
    e = row["epsilon"][0]
    assert round(e["exact_lower"], 4) == round(e["exact_upper"], 4)
    assert f"{e['exact_upper']:.4f}" in text


def test_a_table_too_wide_prints_one_block_per_level() -> None:
    text = _invoke(["calibrate"], columns=50)
    _check(text, _names(["calibrate"]), columns=50)
    lines = text.splitlines()
    state = lines.index("State")
    assert lines[state + 1].startswith("  ρ 1.0001 · σ² 5.00")


def test_a_table_fits_only_with_every_word_whole() -> None:
    listing = Listing(title="t", columns=["level", "x"])
    listing.add(["all levels composed", "1.5"])
    assert listing._fits("level x\nall levels composed 1.5\n", 80)
    assert not listing._fits("level x\nall levels … 1.5\n", 80)
    assert not listing._fits("level x\nall levels compo 1.5\n", 80)  # a word cut
    assert not listing._fits("level x\nall levels composed" + "1.5".rjust(70) + "\n", 80)


@pytest.mark.parametrize(
    ("lo", "hi", "expected"),
    [
        (1.2341e-10, 1.2344e-10, "1.234e-10"),
        (1.2341e-10, 1.2349e-10, "[1.2341e-10, 1.2349e-10]"),
        (0.0, 1.377e-29, "[0, 1.4e-29]"),  # one digit past the first that differs, outwards
        (0.28531, 0.28534, "0.2853"),
        (0.5, 0.5, "0.5"),
    ],
)
def test_fmt_relative(lo: float, hi: float, expected: str) -> None:
    assert fmt_relative(lo, hi) == expected


def test_run_summary_quotes_the_headline_delta(capsys: pytest.CaptureFixture[str]) -> None:
    from flows.cli.summary import print_headline_table

    deltas = [1e-5, 1e-10, 1e-11]
    eps = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    acc = xr.Dataset(
        {
            "rho": ("geolevel", [0.5, 1.0]),
            "eps_bureau": (("geolevel", "delta"), eps + 0.5),
            "eps_exact_lower": (("geolevel", "delta"), eps - 1e-9),
            "eps_exact_upper": (("geolevel", "delta"), eps + 1e-9),
            "composed_rho": ((), 1.5),
            "composed_eps_bureau": ("delta", [7.5, 8.5, 9.5]),
            "composed_eps_exact_lower": ("delta", [7.0, 8.0, 9.0 - 1e-9]),
            "composed_eps_exact_upper": ("delta", [7.0, 8.0, 9.0 + 1e-9]),
        },
        coords={"geolevel": ["US", "Tract_Subset_Group"], "delta": deltas},
        attrs={"headline_delta": 1e-11},
    )
    print_headline_table(acc)
    out = capsys.readouterr().out
    assert "(delta=1e-11)" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert rows["US"][1:] == ["0.5000", "3.5", "3.0000"]
    assert rows["Tract_Subset_Group"][1:] == ["1.0000", "6.5", "6.0000"]
    assert out.splitlines()[-1].split() == ["all", "levels", "composed", "1.5000", "9.5", "9.0000"]
