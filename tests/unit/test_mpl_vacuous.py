"""An MPL lower bound at or below 0 says nothing (ε ≥ 0): every place it reaches a reader — the
report's tables and figures, the Prefect artifact, ``dpaudit compare`` and the ``mpl-coverage``
table — shows "0 (vacuous)", never a negative ε, while the store keeps the raw estimate.

The bounds are real: the default spec's US level (σ² = 400) and a geometric count at ε₀ = 0.2 give
negative estimates at these small sample sizes (checked first, so a change of the estimator that
makes them positive fails here loudly rather than testing nothing)."""

from __future__ import annotations

import json
import pathlib
import re

import numpy as np
import pytest
import xarray as xr

from flows.report.mpl_bound import VACUOUS, WHY
from flows.report.render import render_report
from tests.unit.test_report import _between, build_store


def _real_mpl_group(levels: tuple[str, ...] = ("US", "State"), seed: int = 2026) -> xr.Dataset:
    from auditlib.mpl.audit import mpl_geolevel
    from flows.experiments.mpl_coverage import mpl_dataset, mpl_task_settings
    from flows.spec import parse_spec

    spec = parse_spec(
        {
            "audit": {"seed": seed},
            "mpl": {"enabled": True, "geolevels": list(levels), "n": 2000, "n_confidence": 4000},
        }
    )
    s = mpl_task_settings(spec)
    order = spec.geolevels
    return mpl_dataset([mpl_geolevel(g, order.index(g), **s) for g in spec.mpl_geolevels], spec)


@pytest.fixture(scope="module")
def mpl() -> xr.Dataset:
    ds = _real_mpl_group()
    lb = dict(zip(ds["geolevel"].values, ds["lb"].values, strict=True))
    assert lb["US"] < 0 < lb["State"], lb  # the premise: one vacuous level, one informative
    return ds


def _audit_store(path: pathlib.Path, mpl: xr.Dataset) -> pathlib.Path:
    build_store(path, ("accounting",))
    mpl.to_zarr(path, group="mpl", mode="w", zarr_format=3, consolidated=True)
    return path


def _negatives(lbs: np.ndarray) -> list[str]:
    """How the raw negative bounds would print (to 4 and 3 significant digits, either minus)."""
    out = []
    for x in lbs[lbs < 0]:
        for sig in (4, 3):
            text = f"{abs(float(x)):.{sig}g}"
            out += [f"-{text}", f"−{text}"]
    return out


def test_report_shows_a_negative_bound_as_vacuous(mpl: xr.Dataset, tmp_path: pathlib.Path) -> None:
    store = _audit_store(tmp_path / "a.zarr", mpl)
    html = render_report(store, tmp_path / "r.html").read_text(encoding="utf-8")
    state = f"{float(mpl['lb'].sel(geolevel='State')):.4g}"
    glance = _between(html, '<table class="glance">', "</table>")
    us_row = _between(glance, '<td class="level">US</td>', "</tr>")
    assert f'<td class="num">{VACUOUS}</td>' in us_row
    state_row = _between(glance, '<td class="level">State</td>', "</tr>")
    assert f'<td class="num">{state}</td>' in state_row  # an informative bound as before
    section = _between(html, '<section id="mpl">', "</section>")
    table = _between(section, '<table class="mpl">', "</table>")
    assert f'<td class="num may-wrap" title="{WHY}">{VACUOUS}</td>' in table
    assert f'<td class="num may-wrap">{state}</td>' in table
    assert 'class="note mpl-vacuous"' in section and "ε ≥ 0 always" in section
    at_a_glance = _between(html, '<section id="at-a-glance">', "</section>")
    assert "ε ≥ 0 always" in at_a_glance
    for text in _negatives(np.asarray(mpl["lb"].values)):
        assert text not in html, text
    # the store keeps the raw estimate, and its description says so
    kept = xr.open_zarr(store, group="mpl")
    assert float(kept["lb"].sel(geolevel="US")) < 0
    assert "raw estimate" in kept.attrs["lb"] and "vacuous" in kept.attrs["lb"]


def test_a_store_without_vacuous_bounds_has_no_note(tmp_path: pathlib.Path) -> None:
    html = render_report(
        build_store(tmp_path / "s.zarr", ("accounting", "mpl")), tmp_path / "r.html"
    ).read_text(encoding="utf-8")
    assert VACUOUS not in html and "mpl-vacuous" not in html


def test_loss_curve_figure_draws_a_vacuous_bound_at_0(mpl: xr.Dataset) -> None:
    from flows.report.figures_mpl import loss_curve_figure

    fig = loss_curve_figure(mpl)
    for ax, level in zip(fig.axes, ("US", "State"), strict=True):
        lb = float(mpl["lb"].sel(geolevel=level))
        (line,) = [ln for ln in ax.get_lines() if ln.get_label().startswith("LB")]
        assert line.get_ydata()[0] == max(lb, 0.0)
        label = line.get_label()
        assert (label == f"LB {VACUOUS}") == (lb < 0) and "-" not in label and "−" not in label


def test_at_a_glance_artifact_shows_a_vacuous_bound(
    mpl: xr.Dataset, tmp_path: pathlib.Path
) -> None:
    from flows.audit.artifacts import at_a_glance_rows

    rows, _ = at_a_glance_rows(str(_audit_store(tmp_path / "a.zarr", mpl)))
    by_level = {r["level"]: r["MPL bound"] for r in rows}
    assert by_level["US"] == VACUOUS
    assert by_level["State"] == f"{float(mpl['lb'].sel(geolevel='State')):.4g}"


def test_compare_reads_a_negative_bound_as_0_vacuous(
    mpl: xr.Dataset, tmp_path: pathlib.Path
) -> None:
    from flows.report.compare import compare
    from flows.report.compare_data import audit_numbers
    from flows.report.compare_text import json_dict, table_text

    other = _real_mpl_group(seed=7)
    b_us = float(other["lb"].sel(geolevel="US"))
    assert b_us > 0  # the premise: vacuous in A, informative in B
    a = audit_numbers(str(_audit_store(tmp_path / "a.zarr", mpl)))
    b = audit_numbers(str(_audit_store(tmp_path / "b.zarr", other)))
    c = compare(a, b)
    (us,) = [r for r in c.rows if r.geolevel == "US" and r.measure == "mpl_lb"]
    assert us.a is not None and us.b is not None
    assert us.a.value == 0.0 and us.b.value == b_us and us.diff == b_us  # B − 0, not B − raw A
    text = table_text(c)
    us_block = text[text.index("\nUS\n") : text.index("\nState\n")]
    line = next(ln for ln in us_block.splitlines() if ln.strip().startswith("MPL bound"))
    assert VACUOUS in line and f"{b_us:.4g}" in line, line
    for text_neg in _negatives(np.concatenate([mpl["lb"].values, other["lb"].values])):
        assert text_neg not in text, text_neg
    rows = json.loads(json.dumps(json_dict(c)))["rows"]
    (row,) = [r for r in rows if r["geolevel"] == "US" and r["measure"] == "mpl_lb"]
    assert row["a"]["value"] == 0.0 and row["a"]["vacuous"] is True
    assert row["b"]["value"] == b_us and row["b"]["vacuous"] is False
    (st,) = [r for r in rows if r["geolevel"] == "State" and r["measure"] == "mpl_lb"]
    assert st["a"]["vacuous"] is False
    assert st["a"]["value"] == float(mpl["lb"].sel(geolevel="State"))


def _coverage_group() -> xr.Dataset:
    from auditlib.mpl.coverage import coverage_chunk
    from flows.experiments.mpl_coverage import coverage_dataset

    settings = {"n": 1_000, "n_confidence": 2_500, "alpha": 0.05, "seed": 3}
    mechs, eps = ["geometric_count"], [0.2, 0.7]
    results = {
        (0, ei, 0): coverage_chunk("geometric_count", e, 0, 6, cell=(0, ei), **settings)
        for ei, e in enumerate(eps)
    }
    ds = coverage_dataset(results, mechs, eps, 6, settings)
    medians = np.median(ds["lb"].values[0], axis=-1)
    assert medians[0] < 0 < medians[1], medians  # the premise: one vacuous median
    return ds


def test_coverage_report_and_cli_table_show_a_vacuous_median(tmp_path: pathlib.Path) -> None:
    from flows.audit.artifacts import coverage_rows
    from flows.cli.experiments import mpl_coverage_table
    from flows.experiments.mpl_coverage import GROUP
    from flows.report.figures_mpl import coverage_ecdf_figure

    ds = _coverage_group()
    path = tmp_path / "cov.zarr"
    xr.Dataset(attrs={"run_id": "cov-1"}).to_zarr(path, mode="w", zarr_format=3, consolidated=True)
    ds.to_zarr(path, group=GROUP, mode="w", zarr_format=3, consolidated=True)
    html = render_report(path, tmp_path / "r.html").read_text(encoding="utf-8")
    section = _between(html, '<section id="mpl-coverage">', "</section>")
    rows = re.findall(r"<tr><td class=\"level\">geometric_count</td>(.*?)</tr>", section, re.S)
    assert len(rows) == 2 and VACUOUS in rows[0] and VACUOUS not in rows[1]
    median = f"{float(np.median(ds['lb'].values[0, 1])):.4g}"
    assert median in rows[1]
    for text in _negatives(np.median(ds["lb"].values[0], axis=-1)):
        assert text not in section
    # the eCDF starts at 0: the vacuous bounds are a step there
    ax = coverage_ecdf_figure(ds).axes[0]
    steps = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == 6]
    assert len(steps) == 2
    x = np.asarray(steps[0].get_xdata(), dtype=float)
    raw = ds["lb"].values[0, 0]
    assert x.min() == 0.0 and np.sum(x == 0.0) == np.sum(raw <= 0)
    # the command's table and its Prefect artifact: the same cells
    table = mpl_coverage_table(ds)
    assert table[0].split()[-2:] == ["median", "LB"]
    assert table[1].endswith(VACUOUS) and table[2].endswith(median)
    rows = coverage_rows(ds)
    assert [r["median LB"] for r in rows] == [VACUOUS, median]
