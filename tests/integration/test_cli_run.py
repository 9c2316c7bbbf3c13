"""`dpaudit run` as a user runs it: embedded Prefect API, local Dask cluster, store, report."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

SPEC = """
[audit]
replicates = 2
[population]
states = 2
fanout = { County = 2, Prim = 1, Tract_Subset_Group = 1, Tract_Subset = 2, Block_Group = 2, Block = 3 }
[simulation]
max_cells_per_query = 4
[accounting]
deltas = [1e-10]
composed = false
eps_grid_points = 20
"""


def dpaudit() -> list[str]:
    exe = Path(sys.executable).with_name("dpaudit")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "flows.cli"]


def test_run_writes_store_and_report_then_refuses_to_clobber(tmp_path: Path) -> None:
    spec = tmp_path / "tiny.toml"
    spec.write_text(SPEC)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    cmd = [*dpaudit(), "run", str(spec), "--store", "out/a.zarr", "--report", "out/r.html"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "store:  out/a.zarr" in done.stdout
    html = (tmp_path / "out" / "r.html").read_text()
    assert "data:image/png;base64," in html
    # only the finished store is left: no staging directories beside it
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.zarr", "r.html"]
    code = (
        "import xarray as xr; ds = xr.open_zarr('out/a.zarr', group='accounting'); "
        "print(round(float(ds.eps_exact_upper.sel(geolevel='State', delta=1e-10)), 4))"
    )
    read = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code], cwd=tmp_path, capture_output=True, text=True
    )
    assert read.stdout.strip() == "9.6009", read.stderr  # REFERENCE.md: State 9.600900 @1e-10
    # a second run must not replace the results without --overwrite
    stamp = (tmp_path / "out" / "a.zarr" / "zarr.json").stat().st_mtime_ns
    again = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 2
    assert "already exists; pass --overwrite" in again.stderr
    assert (tmp_path / "out" / "a.zarr" / "zarr.json").stat().st_mtime_ns == stamp
