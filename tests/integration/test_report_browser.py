"""The default spec's report as a committee reads it, in headless Chromium at 1024 and 1400 px.

The store is the default audit (the default spec: its allocation, three states and the nation,
four replicates, every EPL knob, δ 1e-5, 1e-10, 1e-11 with the headline δ 1e-10), once on the
smallest population with siblings (one unit per level, two blocks per block group: the page has the
default run's every table, row and column) and once exactly as shipped (the run `dpaudit run`
makes with no spec: its populated hierarchy, larger numbers in every cell). The test takes a full-page screenshot at each width
(written beside the report; also into ``$DPAUDIT_REPORT_SHOTS`` when set) and checks what a reader
sees first: one δ, no table wider than its container, no state named after the nation, every
headline EPL flagged with whether it is resolved, the summary quoting the table's numbers, and
the tested count's empirical f-DP points (Figure 5b) drawn, their gap in the table the store's.

The report is loaded in Debian's ``chromium`` through Playwright (never a downloaded browser).
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from flows.spec import load_spec, parse_spec
from tests.integration._specs import TINY_FANOUT
from tests.integration.test_report_store import CHROMIUM, CHROMIUM_FLAGS

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WIDTHS = (1024, 1400)
# every visible table against its container: wider is cut off (or scrolls) at this width
OVERFLOW_JS = """() => Array.from(document.querySelectorAll('table'))
  .filter(t => t.offsetParent !== null)
  .map(t => ({cls: t.className, scroll: t.scrollWidth, width: t.offsetWidth,
              room: t.parentElement.clientWidth}))
  .filter(t => Math.max(t.scroll, t.width) > t.room)"""

# the at-a-glance rows: level, the EPL cell, its flags
GLANCE_JS = """() => Array.from(document.querySelectorAll('table.glance tbody tr')).map(r => ({
  level: r.querySelector('td.level')?.innerText ?? '',
  epl: r.querySelector('td.epl-estimate')?.innerText ?? '',
  flag: Array.from(r.querySelectorAll('.flag')).map(f => f.innerText).join(' ')}))"""

# the at-a-glance f-DP gap column: each row's level and the cell under the "f-DP gap" header
GAP_JS = """() => {
  const heads = Array.from(document.querySelectorAll('table.glance thead th')).map(h => h.innerText);
  const col = heads.indexOf('f-DP gap');
  if (col < 0) return null;
  return Array.from(document.querySelectorAll('table.glance tbody tr')).map(r => ({
    level: r.querySelector('td.level')?.innerText ?? '', gap: r.cells[col]?.innerText ?? ''}));
}"""

# Figure 5b (the tested count's empirical f-DP points): its image as drawn, and its number
FDP_FIGURE_JS = """() => {
  const f = document.querySelector('#fig-mpl-fdp');
  if (!f) return null;
  const img = f.querySelector('img');
  return {natural: img.naturalWidth, shown: img.getBoundingClientRect().width,
          room: f.clientWidth, caption: f.querySelector('figcaption').innerText};
}"""


@pytest.fixture(scope="module", params=["smallest", "literal"])
def default_report(
    request: pytest.FixtureRequest,
    prefect_harness: None,
    dask_address: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[pathlib.Path]:
    """The default spec's report: on the smallest population ("smallest"), and as shipped, its own
    population and all ("literal": what `dpaudit run` with no spec writes, about a minute more)."""
    from prefect_dask import DaskTaskRunner

    from flows.audit.flow import audit_flow, run_id_for
    from flows.report.render import render_report
    from storage import store

    default = load_spec().model_dump(mode="json")
    if request.param == "smallest":
        default["population"]["fanout"] = TINY_FANOUT
    spec = parse_spec(default)
    tmp = tmp_path_factory.mktemp(f"default-{request.param}")
    url = str(tmp / "audit.zarr")
    flow = audit_flow.with_options(task_runner=DaskTaskRunner(address=dask_address))
    flow(spec, url, run_id_for(spec))
    store.finalize(url)
    yield render_report(url, tmp / "report.html")


def _text(page: Any, selector: str) -> str:
    return " ".join(page.locator(selector).all_inner_texts())


def test_default_report_reads_correctly_at_1024_and_1400_px(
    default_report: pathlib.Path,
) -> None:
    from playwright.sync_api import sync_playwright

    seen: dict[int, dict[str, Any]] = {}
    shots = []
    with sync_playwright() as pw, tempfile.TemporaryDirectory() as profile:
        ctx = pw.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            page = ctx.new_page()
            page.goto(default_report.as_uri(), wait_until="load")
            for width in WIDTHS:
                page.set_viewport_size({"width": width, "height": 900})
                shot = default_report.with_name(f"report-{default_report.parent.name}-{width}.png")
                page.screenshot(path=str(shot), full_page=True, timeout=120_000)
                shots.append(shot)
                page.evaluate(
                    "() => document.querySelectorAll('details').forEach(d => d.open = true)"
                )
                seen[width] = {
                    "fdp_figure": page.evaluate(FDP_FIGURE_JS),
                    "overflow": page.evaluate(OVERFLOW_JS),
                    "page": page.evaluate("document.documentElement.scrollWidth"),
                    "tables": page.locator("table").count(),
                }
                page.evaluate(
                    "() => document.querySelectorAll('details').forEach(d => d.open = false)"
                )
            top = _text(page, "header") + " " + _text(page, "#at-a-glance")
            summary = _text(page, "#summary")
            rows = page.evaluate(GLANCE_JS)
            gaps = page.evaluate(GAP_JS)
            states_note = _text(page, "#epl-states")
            captions = " ".join(page.locator("figcaption").all_inner_texts())
            wall = _text(page, "#wall-time")
        finally:
            ctx.close()
    if os.environ.get("DPAUDIT_REPORT_SHOTS"):
        for shot in shots:
            shutil.copy(shot, pathlib.Path(os.environ["DPAUDIT_REPORT_SHOTS"]) / shot.name)
    for shot in shots:
        assert shot.stat().st_size > 100_000 and shot.read_bytes().startswith(b"\x89PNG")

    # every table fits its container, the page no wider than the window, at both widths
    for width in WIDTHS:
        assert seen[width]["overflow"] == [], (width, seen[width]["overflow"])
        assert seen[width]["tables"] >= 6
        assert seen[width]["page"] <= width, width

    # one δ on the first screen: the headline δ, stated once at the top
    assert set(re.findall(r"δ = (\d(?:\.\d+)?e-\d+)", top)) == {"1e-10"}
    assert "1e-11" not in top and "1e-5" not in top
    assert top.count("headline δ = 1e-10") == 2  # the statement at the top and the table caption

    # the nation is not a state: three states and the nation, no "US" state column
    assert "3 states (ST01, ST02, ST03) and the nation (US" in states_note
    assert "4 states" not in states_note and "4 states" not in captions
    assert "one column each for US" not in captions
    assert "the nation (US) and 3 states (ST01, ST02, ST03)" in captions

    # every level's headline EPL says whether it is resolved at 4 replicates
    levels = [r for r in rows if r["level"] != "all levels composed"]
    assert len(levels) == 8
    for r in levels:
        assert re.search(r"resolved|not resolved at 4 replicates: run ≥ [\d\u202f]+", r["flag"]), r
        assert re.search(r"within its floor|above its floor", r["flag"]), r
    # the summary's largest EPL is the table's (bias-aware) number for that level
    m = re.search(r"is largest at level (\S+) \(“[^”]+”\): (\S+ \[[^\]]+\])", summary)
    assert m is not None, summary
    table_epl = next(r["epl"] for r in rows if r["level"] == m.group(1))
    assert table_epl.startswith(m.group(2)), (table_epl, m.group(2))
    # the composed EPL is read against what the claimed noise gives, not against the exact ε
    assert "no ε(δ) and not comparable with the exact ε" in summary
    assert "Flow wall time" in top and "the flow's tasks on its" in wall

    # the default audit tests one count per level (MPL with the empirical f-DP points): Figure 5b
    # is drawn, within the page at both widths, and the at-a-glance "f-DP gap" of every level is
    # the store's fdp_gap (to the three significant digits shown)
    from storage import store

    for width in WIDTHS:
        fig = seen[width]["fdp_figure"]
        assert fig is not None, width
        assert fig["natural"] > 500 and 0 < fig["shown"] <= fig["room"] <= width, (width, fig)
        assert fig["caption"].startswith("Figure 5b. The tested count's empirical trade-off")
    mpl = store.open_group(str(default_report.with_name("audit.zarr")), "mpl")
    want = dict(zip([str(g) for g in mpl.geolevel.values], mpl.fdp_gap.values, strict=True))
    assert gaps is not None and len(want) == 8
    shown = {g["level"]: g["gap"] for g in gaps if g["level"] in want}
    assert set(shown) == set(want)
    for level, gap in want.items():
        assert np.isfinite(gap), (level, gap)
        assert float(shown[level]) == pytest.approx(gap, rel=5e-3, abs=5e-4), (level, shown)
