"""A run killed while it writes its report (its store published, no report yet): the same command
run again renders the report from the store, computing nothing again; once both are there it
refuses, saying what the store holds."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from storage import store
from tests._ceilings import PROCESS_CEILING_S
from tests.integration._processes import audit_run, run_until, standalone_env
from tests.integration._specs import tiny_spec

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_run_killed_while_writing_its_report_finishes_it_when_run_again(tmp_path: Path) -> None:
    run = audit_run(tmp_path, tiny_spec(audit={"seed": 31}))
    report = tmp_path / "out" / "r.html"
    cmd = [c for c in run.cmd if c != "--no-report"] + ["--report", str(report)]
    env = standalone_env()
    # killed (the whole process group) once the store is published, before the report is
    run_until(
        cmd, env, tmp_path, lambda: store.is_complete(str(run.target)), 600, "a published store"
    )
    assert not report.exists()
    stamp = (run.target / "zarr.json").stat().st_mtime_ns
    again = subprocess.run(
        cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=PROCESS_CEILING_S
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"holds this spec's finished run {run.run_id} but not its report" in again.stdout, (
        again.stdout
    )
    assert "data:image/png;base64," in report.read_text()
    assert (run.target / "zarr.json").stat().st_mtime_ns == stamp  # nothing computed again
    # both written: the same command refuses, naming what is there
    third = subprocess.run(
        cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=PROCESS_CEILING_S
    )
    assert third.returncode == 2
    assert "already exists; pass --overwrite" in third.stderr
    assert f"finished run {run.run_id}, and its report {report} is written" in third.stderr
