"""``dpaudit compare`` and ``dpaudit report --compare`` on real stores: three tiny audits run by the
flow — A, the same spec again (A2), and B with another allocation, seed and headline δ — compared,
and every number checked against the stores read directly with xarray."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import pty
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr
from typer.testing import CliRunner

from flows.cli.app import app
from flows.report.format import fmt_num
from flows.spec import parse_spec
from storage import store
from tests._ceilings import PROCESS_CEILING_S
from tests.integration._browser import overflow_and_width, report_page
from tests.integration._specs import tiny_spec

pytestmark = pytest.mark.integration

runner = CliRunner()
MPL = {"enabled": True, "geolevels": ["State", "Block"], "n": 4_000, "n_confidence": 10_000}
SPEC_A = tiny_spec(audit={"seed": 11}, mpl=MPL)
SPEC_B = tiny_spec(
    audit={"seed": 12, "allocation": "dhcp_20220825_exp21_1"},
    accounting={"deltas": [1e-5, 1e-10], "headline_delta": 1e-5},
    mpl=MPL,
)
DELTA = 1e-10  # store A's headline δ (tiny_spec's only δ), held by B too


@pytest.fixture(scope="module")
def stores(
    prefect_harness: None, inproc_dask: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """Finished stores a, a2 (the same spec), b; ``unfinished``: a copy of a2 taken before the
    store was finalized (as a reader sees a store a run is still writing)."""
    from prefect_dask import DaskTaskRunner

    from flows.audit.flow import audit_flow, run_id_for

    tmp = tmp_path_factory.mktemp("compare")
    flow = audit_flow.with_options(task_runner=DaskTaskRunner(address=inproc_dask))
    out = {}
    for name, raw in (("a", SPEC_A), ("a2", SPEC_A), ("b", SPEC_B)):
        spec = parse_spec(raw)
        url = str(tmp / f"{name}.zarr")
        flow(spec, url, run_id_for(spec))
        if name == "a2":
            out["unfinished"] = str(tmp / "unfinished.zarr")
            shutil.copytree(url, out["unfinished"])
        store.finalize(url)
        out[name] = url
    yield out


def _json(a: str, b: str) -> dict[str, Any]:
    res = runner.invoke(app, ["compare", a, b, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _open(url: str, group: str) -> xr.Dataset:
    return xr.open_zarr(url, group=group, consolidated=True, chunks=None)


def _expected(url: str) -> dict[tuple[str, str], tuple[float, float, float]]:
    """(level, measure) -> (value, low, high), read from the store directly."""
    acc, epl, mpl = _open(url, "accounting"), _open(url, "epl"), _open(url, "mpl")
    out: dict[tuple[str, str], tuple[float, float, float]] = {}
    nan = math.nan
    for g in acc.geolevel.values:
        row = acc.sel(geolevel=g, delta=DELTA)
        lo, hi = float(row.eps_exact_lower), float(row.eps_exact_upper)
        out[(str(g), "bureau_eps")] = (float(row.eps_bureau), nan, nan)
        out[(str(g), "exact_eps")] = (hi, lo, hi)
    for g in epl.geolevel.values:
        e = epl.sel(geolevel=g)
        status = np.array([str(v) for v in e.epl_status.values])
        ok = (status == "ok") & np.isfinite(e.epl_bias_aware.values)
        if ok.any():
            q = int(np.argmax(np.where(ok, e.epl_bias_aware.values, -np.inf)))
            out[(str(g), "epl")] = (
                float(e.epl_bias_aware[q]),
                float(e.epl_ci_low[q]),
                float(e.epl_ci_high[q]),
            )
    for g in mpl.geolevel.values:
        m = mpl.sel(geolevel=g)
        lb = float(m.lb)  # a bound at or below 0 says nothing: compared as 0 (vacuous)
        out[(str(g), "mpl_lb")] = (max(lb, 0.0), max(lb, 0.0), 2 * float(m.loss_star) - lb)
    return out


def _side(d: dict[str, Any]) -> tuple[float, float, float]:
    return tuple(math.nan if d[k] is None else d[k] for k in ("value", "low", "high"))  # type: ignore[return-value]


def _same(x: tuple[float, ...], y: tuple[float, ...]) -> bool:
    return all(u == v or (math.isnan(u) and math.isnan(v)) for u, v in zip(x, y, strict=True))


def test_compare_numbers_are_the_stores_numbers(stores: dict[str, str]) -> None:
    out = _json(stores["a"], stores["b"])
    ea, eb = _expected(stores["a"]), _expected(stores["b"])
    assert out["delta"] == DELTA
    assert any("headline δ differ" in n for n in out["notes"])
    keys = {d["key"]: (d["a"], d["b"]) for d in out["spec_differences"]}
    assert keys["audit.allocation"] == ("dhcp_20220825_paper", "dhcp_20220825_exp21_1")
    assert keys["audit.seed"] == ("11", "12")
    assert keys["accounting.headline_delta"] == ("1e-10", "1e-05")
    assert not any(k.startswith(("output.", "cluster.")) for k in keys)
    rows = {(r["geolevel"], r["measure"]): r for r in out["rows"]}
    assert set(rows) == set(ea) == set(eb)  # every level of the tiny hierarchy, every measure
    n_changed = 0
    for key, r in rows.items():
        a, b = _side(r["a"]), _side(r["b"])
        assert _same(a, ea[key]) and _same(b, eb[key]), key
        assert r["b_minus_a"] == b[0] - a[0]
        assert r["b_over_a"] == (b[0] / a[0] if a[0] else None)
        # the verdict, recomputed: ε moved at all (Bureau) or brackets disjoint (exact); EPL and
        # MPL intervals disjoint
        if a[0] == b[0] and _same(a, b):
            want = "same"
        elif key[1] == "bureau_eps":
            want = "changed"
        else:
            disjoint = a[2] < b[1] or b[2] < a[1]
            within = "within bracket" if key[1] == "exact_eps" else "within noise"
            want = "changed" if disjoint else within
        assert r["status"] == want, (key, r)
        n_changed += want == "changed"
    # two allocations: the Bureau's ε of every level moved
    assert all(rows[(g, "bureau_eps")]["status"] == "changed" for g, _ in rows)
    assert out["changed"] == n_changed + sum(q["status"] == "changed" for q in out["query_rows"])
    assert out["no_change"] is False

    # per query: the EPL of every query both stores estimated (two allocations: maybe none)
    both = _queries(stores["a"]).keys() & _queries(stores["b"]).keys()
    assert {(q["geolevel"], q["query"]) for q in out["query_rows"]} == both


def _queries(url: str) -> dict[tuple[str, str], tuple[float, float, float]]:
    """(level, query) -> (bias-aware EPL, interval) of every query estimated, read directly."""
    epl = _open(url, "epl")
    out = {}
    for g in epl.geolevel.values:
        for q in epl["query"].values:
            e = epl.sel(geolevel=g, query=q)
            if str(e.epl_status.values) == "ok" and np.isfinite(float(e.epl_bias_aware)):
                out[(str(g), str(q))] = (
                    float(e.epl_bias_aware),
                    float(e.epl_ci_low),
                    float(e.epl_ci_high),
                )
    return out


def test_identical_stores_compare_as_no_change(stores: dict[str, str]) -> None:
    out = _json(stores["a"], stores["a2"])
    assert out["no_change"] is True and out["changed"] == 0
    assert out["spec_differences"] == [] and out["notes"] == []
    assert {r["status"] for r in out["rows"] + out["query_rows"]} == {"same"}
    # a re-run of the same spec: the same numbers as its store holds, query by query
    expected = _queries(stores["a2"])
    assert {(q["geolevel"], q["query"]) for q in out["query_rows"]} == expected.keys()
    for q in out["query_rows"]:
        assert _same(_side(q["b"]), expected[(q["geolevel"], q["query"])]), q
    table = runner.invoke(app, ["compare", stores["a"], stores["a2"]])
    assert table.exit_code == 0 and "No change: the same spec and the same numbers." in table.stdout


def test_a_store_compared_with_itself_has_zero_differences(stores: dict[str, str]) -> None:
    out = _json(stores["b"], stores["b"])
    assert out["delta"] == 1e-5  # B's own headline δ
    for r in out["rows"] + out["query_rows"]:
        assert r["b_minus_a"] == 0.0, r
        assert r["b_over_a"] == 1.0 or r["a"]["value"] == 0.0, r
    res = runner.invoke(app, ["compare", stores["b"], stores["b"], "--format", "csv"])
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert len(rows) == len(out["rows"]) + len(out["query_rows"])
    assert {r["b_minus_a"] for r in rows} == {"0.0"}
    assert {r["status"] for r in rows} == {"same"}


def _lines_of(args: list[str], *, tty: bool) -> list[str]:
    """The table printed by a real ``dpaudit`` process on a terminal (a pty 80 columns wide) or
    into a file."""
    cmd = [sys.executable, "-m", "flows.cli", "compare", *args]
    env = {**os.environ, "COLUMNS": "80", "LINES": "24"}
    if not tty:
        with tempfile.TemporaryFile() as fh:
            subprocess.run(cmd, stdout=fh, env=env, check=True, timeout=PROCESS_CEILING_S)
            fh.seek(0)
            return fh.read().decode().splitlines()
    leader, follower = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=follower, stderr=subprocess.DEVNULL, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=PROCESS_CEILING_S) == 0
    return b"".join(chunks).decode().replace("\r\n", "\n").splitlines()


@pytest.mark.slow
def test_table_fits_80_columns_on_a_terminal_and_in_a_file(stores: dict[str, str]) -> None:
    for tty in (True, False):
        lines = _lines_of([stores["a"], stores["b"]], tty=tty)
        assert lines[0] == "dpaudit compare", lines[:3]
        assert any(line.startswith("  Bureau ε") for line in lines)
        assert any("audit.allocation" in line for line in lines)
        widest = max(lines, key=len)
        assert len(widest) <= 80, (tty, widest)


@pytest.mark.parametrize(
    "case",
    [
        "missing",
        "not-a-store",
        "unfinished",
        "corrupt",
        "forged-seed",
        "forged-allocation",
        "reversed-delta",
        "coverage-store",
    ],
)
def test_bad_input_exits_2_naming_the_store(
    stores: dict[str, str], case: str, tmp_path: Path, inproc_dask: str
) -> None:
    a = stores["a"]
    bad = str(tmp_path / "x.zarr")
    fix = ""
    if case == "missing":
        fix = "give a result store"
    elif case == "not-a-store":
        Path(bad).mkdir()
        fix = "give the directory a run wrote"
    elif case == "unfinished":
        bad, fix = stores["unfinished"], "wait for the run to finish"
    elif case == "corrupt":
        shutil.copytree(a, bad)
        chunk = next(
            p for p in sorted(Path(bad, "residuals", "residual").rglob("*")) if p.is_file()
        )
        data = bytearray(chunk.read_bytes())
        data[-1] ^= 0xFF
        chunk.write_bytes(bytes(data))
        fix = "re-run the audit"
    elif case.startswith("forged"):
        # the root zarr.json edited by hand: its seed, or the consolidated copy of the accounting
        # group's allocation (what every reader sees; the group's own document is unchanged)
        shutil.copytree(a, bad)
        root = Path(bad, "zarr.json")
        meta = json.loads(root.read_text())
        if case == "forged-seed":
            meta["attributes"]["seed"] += 1
        else:
            meta["consolidated_metadata"]["metadata"]["accounting"]["attributes"]["allocation"] = (
                "pl94_2021_production"
            )
        root.write_text(json.dumps(meta, indent=2))
        fix = "failed its integrity check: zarr.json"
        report = runner.invoke(app, ["report", bad, "-o", str(tmp_path / "r.html")])
        assert report.exit_code == 1 and len(report.stderr.strip().splitlines()) == 1
        assert fix in report.stderr and not (tmp_path / "r.html").exists()
    elif case == "reversed-delta":
        # B's headline δ 1e-5 is not among A's δ: refused, naming A and the δ to add
        a, bad, fix = stores["b"], stores["a"], "in accounting.deltas"
    else:
        from prefect_dask import DaskTaskRunner

        from flows.experiments.mpl_coverage import mpl_coverage_flow

        flow = mpl_coverage_flow.with_options(task_runner=DaskTaskRunner(address=inproc_dask))
        flow(bad, ["laplace"], [0.7], 4, chunk=4, n=2_000, n_confidence=5_000, alpha=0.05, seed=5)
        store.finalize(bad)
        fix = "give two stores written by dpaudit run"
    out = tmp_path / "out.txt"
    before = sorted(p.name for p in tmp_path.iterdir())
    res = runner.invoke(app, ["compare", a, bad, "-o", str(out)])
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpaudit: error: "), res.stderr
    assert repr(bad) in lines[0] and fix in lines[0], lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


@pytest.mark.slow
def test_report_with_compare_section_fits_1024_px(stores: dict[str, str], tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    # this store A, the other B: at A's headline δ, which B holds too
    res = runner.invoke(app, ["report", stores["a"], "-o", str(html), "--compare", stores["b"]])
    assert res.exit_code == 0, res.output
    with report_page(html, width=1024) as page:
        overflow, width = overflow_and_width(page)
        title = page.locator("#compared-with h2").inner_text()
        cells = page.evaluate(
            "() => Array.from(document.querySelectorAll('#compared-with table.compare"
            " tbody tr')).map(r => Array.from(r.cells).map(c => c.innerText.trim()))"
        )
        spec_keys = page.locator("#compared-with table.compare-spec code").all_inner_texts()
    assert overflow == [] and width <= 1024, overflow
    assert title == f"Compared with {Path(stores['b']).name}"
    assert "audit.allocation" in spec_keys
    ea, eb = _expected(stores["a"]), _expected(stores["b"])
    claim_rows = [c for c in cells if c[1] == "Claim"]
    assert len(claim_rows) == 8  # each level's claim verdict in both stores (by construction)
    assert all(c[2:4] == ["consistent", "consistent"] for c in claim_rows), claim_rows
    cells = [c for c in cells if c[1] != "Claim"]
    assert len(cells) == len(ea)  # one row per level and measure either store has
    level, seen = "", 0
    for c in cells:
        level = c[0] or level
        if c[1] == "Bureau ε":  # the other store (B), this store (A), as the glance table prints
            assert c[2:4] == [
                fmt_num(eb[(level, "bureau_eps")][0], 5),
                fmt_num(ea[(level, "bureau_eps")][0], 5),
            ]
            seen += 1
    assert seen == len({g for g, _ in ea})
