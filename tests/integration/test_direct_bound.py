"""`dpaudit direct`'s lower bound on ε as a reader sees it: a bound at or below 0 says nothing
(ε ≥ 0 always), so the command's table and the run's summary artifact show "0 (vacuous)" with the
note, never a number; the store keeps the estimate as computed and says so. An informative bound
prints as its number."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage import store

pytestmark = pytest.mark.integration

#: Flaxman's GDPC on 20,000 people, one person moved into leaf 500, leaf 0's count observed
BASE = ["--people", "20000", "--levels", "2", "--mean", "20", "--algorithm", "gdpc",
        "--to-leaf", "500", "--min-events", "20"]  # fmt: skip


def run_direct(args: list[str], url: str, dask_address: str) -> list[str]:
    from typer.testing import CliRunner

    from flows.cli.app import app

    res = CliRunner().invoke(
        app, ["direct", *BASE, *args, "--scheduler", dask_address, "--store", url]
    )
    assert res.exit_code == 0, res.output
    return res.stdout.splitlines()


def row(lines: list[str], event: str) -> list[str]:
    """The cells of an event kind's row of the printed table."""
    (line,) = [x for x in lines if x.split()[:1] == [event]]
    return line.split(maxsplit=3)


def test_a_vacuous_direct_bound_reads_0_vacuous(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    from flows.audit.artifacts import direct_rows
    from flows.experiments.direct_loss import GROUP
    from flows.report.mpl_bound import NOTE, VACUOUS

    # ε = 0.05 and 400 runs a side: no kept event's interval excludes a log-ratio of 0
    url = str(tmp_path / "vacuous.zarr")
    lines = run_direct(
        ["--epsilon", "0.05", "--reps", "400", "--chunk", "200", "--seed", "1"], url, dask_address
    )
    ds = store.open_group(url, GROUP)
    raw = ds.attrs["epl_lower_ge"]
    assert raw <= 0.0 and ds.sizes["k_ge"] > 0  # events were kept, the bound is vacuous
    kept, epl, shown = row(lines, "ge")[1:]
    assert kept == str(ds.sizes["k_ge"]) and float(epl) == pytest.approx(ds.attrs["epl_ge"], 1e-3)
    assert shown == VACUOUS
    assert NOTE in lines
    assert not any("0.0000" in x.split()[-1:] for x in lines if x.startswith(("eq", "ge")))
    arts = {r["events"]: r for r in direct_rows(ds)}
    assert arts["ge"]["lower bound"] == VACUOUS
    assert "stored as estimated" in ds.attrs["estimate"] and "vacuous" in ds.attrs["estimate"]

    # ε = 1 and 1,600 runs a side: the bound is informative and prints as its number
    url = str(tmp_path / "informative.zarr")
    lines = run_direct(
        ["--epsilon", "1.0", "--reps", "1600", "--chunk", "800", "--seed", "4"], url, dask_address
    )
    ds = store.open_group(url, GROUP)
    lb = ds.attrs["epl_lower_ge"]
    assert 0.3 < lb <= 1.0
    assert float(row(lines, "ge")[3]) == pytest.approx(lb, abs=1e-4)
    assert NOTE not in lines and not any(VACUOUS in x for x in lines)
    arts = {r["events"]: r for r in direct_rows(ds)}
    assert float(arts["ge"]["lower bound"]) == pytest.approx(lb, rel=1e-3)
