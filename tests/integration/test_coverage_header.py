"""The report's header of a store written by ``dpaudit mpl-coverage`` or ``fdp-coverage`` (no audit
in it): it names what the store holds — the experiment, its mechanisms and claims, repetitions,
draws, confidence, seed, run id, workers — each with a value read from the store, and no field
of an audit (allocation, neighbours, …) left empty or "—"."""

from __future__ import annotations

import html as html_lib
import re
from pathlib import Path

import pytest

from storage import store

pytestmark = pytest.mark.integration


def invoke(args: list[str]) -> None:
    from typer.testing import CliRunner

    from flows.cli.app import app

    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output


def header_of(url: str, out: Path) -> tuple[str, dict[str, str]]:
    """(the page's header, its definition list as {term: value})."""
    from flows.report.render import render_report

    page = render_report(url, out).read_text(encoding="utf-8")
    head = page[page.index("<header>") : page.index("</header>")]
    pairs = re.findall(r"<dt>(.*?)</dt>\s*<dd[^>]*>(.*?)</dd>", head, re.S)
    meta = {html_lib.unescape(t).strip(): html_lib.unescape(v).strip() for t, v in pairs}
    return head, meta


def check_no_empty_field(head: str, meta: dict[str, str]) -> None:
    assert meta and all(v and v != "—" and "—" not in v for v in meta.values()), meta
    assert "Allocation" not in meta and "neighbours" not in head  # no audit fields


def test_coverage_stores_name_what_they_hold_in_the_header(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    from flows.experiments.fdp_coverage import GROUP as FDP_GROUP
    from flows.experiments.mpl_coverage import GROUP as MPL_GROUP

    url = str(tmp_path / "mpl.zarr")
    invoke(
        ["mpl-coverage", "-m", "laplace", "-m", "geometric_count", "-e", "0.7", "--reps", "4",
         "--n", "2000", "--N", "5000", "--alpha", "0.1", "--seed", "3",
         "--scheduler", dask_address, "--store", url]
    )  # fmt: skip
    ds, root = store.open_group(url, MPL_GROUP), store.root_attrs(url)
    head, meta = header_of(url, tmp_path / "mpl.html")
    check_no_empty_field(head, meta)
    assert meta["Mechanisms"] == ", ".join(str(m) for m in ds.mechanism.values)
    assert meta["Repetitions"].startswith(f"{ds.sizes['rep']} ")
    assert meta["Seed"] == str(ds.attrs["seed"]) == "3"
    assert meta["α"].startswith("0.1 ") and "0.9" in meta["α"]
    assert meta["Run id"] == root["run_id"]
    assert meta["Workers"].startswith(str(root["n_workers"]))
    assert "mpl-coverage" in head

    url = str(tmp_path / "fdp.zarr")
    invoke(
        ["fdp-coverage", "-m", "gaussian", "-p", "1", "--reps", "4", "--n-select", "2000",
         "--n", "10000", "--seed", "5", "--scheduler", dask_address, "--store", url]
    )  # fmt: skip
    ds, root = store.open_group(url, FDP_GROUP), store.root_attrs(url)
    head, meta = header_of(url, tmp_path / "fdp.html")
    check_no_empty_field(head, meta)
    assert meta["Mechanisms"] == "gaussian"
    assert meta["Confidence bands"] == ", ".join(str(b) for b in ds.band.values)
    assert meta["Repetitions"].startswith(f"{ds.sizes['rep']} ")
    assert meta["Confidence"] == f"{ds.attrs['conf']:g}"
    assert meta["Seed"] == "5" and meta["Run id"] == root["run_id"]
    assert "fdp-coverage" in head
