"""`dpaudit run` where a failed run's last writes left chunk files at the spec's staging copy (a
task on a cluster that outlived the run): the run removes them, says so and completes; anything
else there stops it before it starts (exit 2, one line naming the place and the fix), untouched."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.audit.flow import run_id_for
from flows.cli.app import app
from flows.spec.files import load_spec
from storage import staging, store
from tests.integration._specs import tiny_spec, to_toml
from tests.unit.test_staging_remnant import remains
from tests.unit.test_store_safety import tree

pytestmark = pytest.mark.integration


def test_a_run_clears_the_remains_at_its_staging_copy_and_refuses_anything_else(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "a.toml"
    spec.write_text(to_toml(tiny_spec(mpl={"enabled": False})))
    target = tmp_path / "a.zarr"
    place = staging.staging_path(str(target), run_id_for(load_spec(spec)))
    root = remains(place)
    (root / "notes.txt").write_text("mine\n")  # not what a write leaves: refused
    before = tree(root)
    args = ["run", str(spec), "--store", str(target), "--no-report"]
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 2, refused.output
    assert refused.stderr.count("dpaudit: error:") == 1
    assert repr(place) in refused.stderr and "move it away and run again" in refused.stderr
    assert tree(root) == before and not target.exists()

    (root / "notes.txt").unlink()  # now only what the writes left
    ok = CliRunner().invoke(app, args)
    assert ok.exit_code == 0, ok.output
    assert f"removed {place}: what a failed run's last writes left there" in ok.stderr
    assert "resuming" not in ok.stderr
    assert store.is_complete(str(target)) and not Path(place).exists()
    verified = CliRunner().invoke(app, ["verify", str(target)])
    assert verified.exit_code == 0, verified.output
