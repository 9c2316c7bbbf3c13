"""A tiny real store (the audit flow on Prefect's test harness and a Dask cluster) as people read it:
Su, Su & Wang's reduced noise in the store, the report in headless Chromium, the notebooks run on it.

The report is loaded in Debian's ``chromium`` through Playwright (never a downloaded browser).
"""

from __future__ import annotations

import pathlib
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from flows.spec import parse_spec
from storage import schema as S
from storage import store
from tests._ceilings import PROCESS_CEILING_S

pytestmark = pytest.mark.integration

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--run-all-compositor-stages-before-draw",
]
HOSTILE_NAME = 'tiny </pre><script>alert("x")</script> & <b>bold</b>'
TINY: dict[str, Any] = {
    "audit": {"replicates": 2, "seed": 11, "name": HOSTILE_NAME},
    "population": {
        "states": 1,
        "fanout": {
            "County": 2,
            "Prim": 1,
            "Tract_Subset_Group": 1,
            "Tract_Subset": 1,
            "Block_Group": 1,
            "Block": 2,
        },
    },
    "simulation": {"max_cells_per_query": 3},
    "accounting": {"deltas": [1e-5, 1e-10, 1e-11], "eps_grid_points": 40},
}
# Su, Su & Wang Table 1 (δ* = 1e-11), REFERENCE.md: variance cut per level as printed
TABLE1_CUT = {
    "US": 0.2088,
    "State": 0.1508,
    "County": 0.1758,
    "Prim": 0.1662,
    "Tract_Subset_Group": 0.1662,
    "Tract_Subset": 0.1533,
    "Block_Group": 0.1689,
    "Block": 0.2482,
}


@pytest.fixture(scope="module")
def tiny_store(
    prefect_harness: None, dask_address: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, pathlib.Path]]:
    from prefect_dask import DaskTaskRunner

    from flows.audit.flow import audit_flow, run_id_for
    from flows.report.render import render_report

    spec = parse_spec(TINY)
    tmp = tmp_path_factory.mktemp("tiny")
    url = str(tmp / "tiny.zarr")
    flow = audit_flow.with_options(task_runner=DaskTaskRunner(address=dask_address))
    flow(spec, url, run_id_for(spec))
    store.finalize(url)
    yield url, render_report(url, tmp / "report.html")


def test_store_holds_su_su_wang_reduced_noise_and_its_accuracy(
    tiny_store: tuple[str, pathlib.Path],
) -> None:
    url, _ = tiny_store
    acc = store.open_group(url, S.ACCOUNTING)
    assert acc.attrs["calibration_delta"] == 1e-11
    for level, cut in TABLE1_CUT.items():
        row = acc.sel(geolevel=level)
        lo, hi = float(row.variance_cut_lower), float(row.variance_cut_upper)
        assert lo <= hi and lo == pytest.approx(cut, abs=5e-5), level
        # at the calibrated noise the exact ε(δ*) meets the Bureau's claim of the unscaled noise
        assert float(row.calibration_target_eps) == pytest.approx(
            float(row.eps_bureau.sel(delta=1e-11)), rel=1e-12
        )
    # Su, Su & Wang §3.3 with exact accounting: a common cut of all levels, smaller than any level's
    assert 0.10 < float(acc.composed_variance_cut_lower) < min(TABLE1_CUT.values())

    accuracy = store.open_group(url, S.ACCURACY)
    bureau = accuracy.sel(noise="bureau")
    reduced = accuracy.sel(noise="reduced")
    measured = np.isfinite(bureau.mse.values)
    assert measured.any()
    # no post-processing: MSE = Var of the DG ≈ σ² (σ² ≥ 5 here), so it falls by the variance cut
    np.testing.assert_allclose(
        bureau.mse.values[measured], bureau.sigma2.values[measured], rtol=1e-9
    )
    factor = acc.calibration_factor_upper.values[:, None]
    ratio = reduced.mse.values / bureau.mse.values
    np.testing.assert_allclose(ratio[measured], np.broadcast_to(factor, ratio.shape)[measured])
    # clipping at 0 halves the error at count 0
    np.testing.assert_allclose(
        bureau.mse_clipped.sel(count=0).values[measured], bureau.mse.values[measured] / 2
    )


@pytest.mark.slow
def test_report_renders_in_headless_chromium(
    tiny_store: tuple[str, pathlib.Path], tmp_path: pathlib.Path
) -> None:
    from playwright.sync_api import sync_playwright

    _, report = tiny_store
    console_errors: list[str] = []
    dialogs: list[str] = []
    shot = tmp_path / "report.png"
    with sync_playwright() as pw, tempfile.TemporaryDirectory(dir=tmp_path) as profile:
        ctx = pw.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            page = ctx.new_page()
            page.on(
                "console", lambda m: console_errors.append(m.text) if m.type == "error" else None
            )
            page.on("pageerror", lambda e: console_errors.append(str(e)))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(report.as_uri(), wait_until="load")
            images = page.evaluate(
                "Array.from(document.images).map(i => ({id: i.closest('figure')?.id, "
                "complete: i.complete, w: i.naturalWidth, h: i.naturalHeight}))"
            )
            n_scripts = page.evaluate("document.scripts.length")
            spec_text = page.locator("#spec").text_content()
            name_text = page.locator("#audit-name").text_content()
            glance_rows = page.locator("table.glance tbody tr").count()
            page.screenshot(path=str(shot), full_page=True, timeout=120_000)
        finally:
            ctx.close()

    assert console_errors == [] and dialogs == []
    ids = {i["id"] for i in images}
    assert {"fig-eps-delta", "fig-tradeoff", "fig-epl", "fig-residuals"} <= ids
    assert {"fig-accuracy-mse", "fig-accuracy-mae"} <= ids
    for img in images:
        assert img["complete"] and img["w"] > 100 and img["h"] > 100, img
    # the spec's hostile name is text, not markup: no script element, no dialog, shown verbatim
    assert n_scripts == 0 and name_text == HOSTILE_NAME
    assert spec_text is not None and HOSTILE_NAME.replace('"', '\\"') in spec_text
    assert glance_rows == len(TABLE1_CUT) + 1  # the levels and all levels composed
    assert shot.stat().st_size > 50_000 and shot.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize(
    "notebook", sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb")), ids=str
)
@pytest.mark.slow
def test_notebook_runs_on_the_store(
    tiny_store: tuple[str, pathlib.Path],
    notebook: str,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import nbformat
    from nbclient import NotebookClient

    url, _ = tiny_store
    monkeypatch.setenv("DPAUDIT_STORE", url)
    nb = nbformat.read(ROOT / "notebooks" / notebook, as_version=4)
    client = NotebookClient(
        nb,
        timeout=PROCESS_CEILING_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == []


def test_readme_notebook_snippet_runs_on_the_store(
    tiny_store: tuple[str, pathlib.Path], tmp_path: pathlib.Path
) -> None:
    """The README's "Opening results in a notebook" snippet, verbatim, on a store at
    results/audit.zarr: its ``r`` is the ST01/County block's residuals, its own items only."""
    import subprocess
    import sys

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Opening results in a notebook", 1)[1]
    snippet = section.split("```python\n", 1)[1].split("```", 1)[0]
    url, _ = tiny_store
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "audit.zarr").symlink_to(url)
    check = "\nimport numpy as np\nnp.save('r.npy', r.values)\nprint(type(epl).__name__)\n"
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", snippet + check],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=PROCESS_CEILING_S,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Dataset"
    res = store.open_group(url, S.RESIDUALS)
    s = list(res.state.values).index("ST01")
    g = list(res.geolevel.values).index("County")
    want, _ = store.read_residuals(url, s, g)
    assert want.shape == (2, int(res.n_items.values[s, g])) and want.shape[1] > 0
    np.testing.assert_array_equal(np.load(tmp_path / "r.npy"), want)
