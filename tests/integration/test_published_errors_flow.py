"""Error bars of a published table through the audit flow on a real Dask cluster into a real Zarr
store: the ranges' moments merged as one run's (``auditlib.published`` called directly, in one
range), the areas summed per replicate; bad inputs end ``dpaudit run`` with exit 2 and no store;
``dpaudit run`` of the shipped example prints where the CSV is (slow)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from auditlib.published import amc_interval, amc_replicates
from flows.spec import parse_spec
from storage import schema as S
from storage import store
from tests._ceilings import PROCESS_CEILING_S
from tests.unit.test_published_errors import spec_data, write_published

pytestmark = pytest.mark.integration

COUNTRY = Path(__file__).resolve().parents[2] / "examples" / "country"


def test_error_bars_of_a_published_table_through_the_flow(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    from prefect_dask import DaskTaskRunner

    from flows.audit.flow import audit_flow, run_id_for
    from flows.audit.published_errors import AREAS_GROUP, UNITS_GROUP, amc_inputs, amc_seed
    from flows.spec.plan import make_plan

    table, areas, _ = write_published(tmp_path)
    s = parse_spec(spec_data(table, areas))  # 4 replicates in 2 ranges of 2, on 2 workers
    url = str(tmp_path / "e.zarr")
    audit_flow.with_options(task_runner=DaskTaskRunner(address=dask_address))(s, url, run_id_for(s))
    store.finalize(url)
    groups = store.groups(url)
    assert UNITS_GROUP in groups and AREAS_GROUP in groups
    assert not {S.EPL, S.ACCOUNTING, S.CLAIMS, S.ACCURACY} & set(groups)  # switched off
    units = store.open_group(url, UNITS_GROUP).load()
    area_ds = store.open_group(url, AREAS_GROUP).load()
    assert units.attrs["replicates"] == 4 and units.attrs["alpha"] == 0.1
    # the same numbers from auditlib directly, every replicate in one range
    plan = make_plan(s)
    x = amc_inputs(plan)
    whole = amc_replicates(
        x["hierarchy"], x["published"], x["query_matrices"], x["measured"], 4, amc_seed(plan),
        areas=x["areas"], tol=x["tol"],
    )  # fmt: skip
    for lv in whole.level_names:
        for q in whole.queries:
            m = whole.levels[lv][q]
            sel = (units["level"].values == lv) & (units["query"].values == q)
            np.testing.assert_array_equal(units["published"].values[sel], m.published.ravel())
            np.testing.assert_allclose(units["bias"].values[sel], m.bias.ravel())
            np.testing.assert_allclose(units["mse"].values[sel], m.mse.ravel())
            iv = amc_interval(m, 0.1)
            np.testing.assert_array_equal(units["lower"].values[sel], iv.lower.ravel())
            np.testing.assert_array_equal(units["upper"].values[sel], iv.upper.ravel())
    for q in whole.queries:
        m = whole.areas[q]
        sel = area_ds["query"].values == q
        np.testing.assert_allclose(area_ds["variance"].values[sel], m.variance.ravel())
        assert list(area_ds["unit"].values[sel][:: m.published.shape[1]]) == ["D0", "D1"]


def test_bad_error_bars_inputs_exit_2_without_a_store(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli.app import app

    table, areas, _ = write_published(tmp_path)
    spec = tmp_path / "errors.toml"
    good = (
        '[audit]\nallocation = "pl94_2021_production"\nreplicates = 4\n[population]\n'
        f'kind = "table"\npath = "{table.name}"\nlevels = ["county"]\nunit = "block"\n'
        'attributes = "pl94"\n[release]\nkind = "published"\nlevels = { US = "All", State = "", '
        'County = "county", Tract = "", Block_Group = "", Block = "block" }\n'
        f'areas = "{areas.name}"\n'
    )
    target = tmp_path / "bad.zarr"
    (tmp_path / "unknown.csv").write_text("block,area\nB00,D0\nB77,D0\n")
    for body, word in (
        (good.replace(areas.name, "nowhere.csv"), "nowhere.csv"),
        (good.replace(areas.name, "unknown.csv"), "unknown unit 'B77'"),
        (good + "alpha = 1.2\n", "release.alpha = 1.2"),
    ):
        spec.write_text(body)
        res = CliRunner().invoke(app, ["run", str(spec), "--store", str(target), "--no-report"])
        assert res.exit_code == 2, res.output
        assert word in res.output
        assert not target.exists()


@pytest.mark.slow
def test_dpaudit_run_of_the_example_prints_the_csv(prefect_harness: None, tmp_path: Path) -> None:
    """The shipped example, 4 runs instead of 25: one command, the CSV beside the store, its path
    printed, the report linking it."""
    import os
    import sys

    from prefect.settings import PREFECT_API_URL

    for f in ("country.csv", "constituencies.csv", "error_bars.toml"):
        shutil.copy(COUNTRY / f, tmp_path)
    spec = tmp_path / "error_bars.toml"
    spec.write_text(spec.read_text().replace("replicates = 25", "replicates = 4"))
    env = {
        **os.environ,
        "PREFECT_API_URL": str(PREFECT_API_URL.value()),
        "DPAUDIT_LOG_DIR": str(tmp_path / "logs"),
        "PYTHONPATH": str(COUNTRY.parents[1]),  # this checkout's dpaudit, whatever is installed
    }
    cmd = [sys.executable, "-m", "flows.cli", "run", "error_bars.toml", "--store", "e.zarr",
           "--report", "e.html"]  # fmt: skip
    done = subprocess.run(
        cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=PROCESS_CEILING_S
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "csv:    e.errors.csv" in done.stdout
    summary = done.stdout.split("run ", 1)[1].split("report:", 1)[0].splitlines()
    assert len(summary) >= 8 and max(len(line) for line in summary) <= 80, done.stdout
    header = (tmp_path / "e.errors.csv").read_text().splitlines()[0]
    assert header.startswith("level,unit,query,cell,published,lower,upper")
    html = (tmp_path / "e.html").read_text()
    assert 'href="e.errors.csv"' in html and "Error bars of the published counts" in html
