"""`dpaudit run` of a spine TopDown stopped at County (``release.lowest_level``): the stored
residuals of the nation, the state and its counties are those of the whole run, and the table and
the report say that the composed ε is the whole allocation's, naming the levels not simulated."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from flows.cli.app import app
from storage import store
from storage.residual_blocks import read_items, read_residuals
from tests.integration._specs import to_toml

pytestmark = pytest.mark.integration


def _spec(lowest: str) -> dict:
    release = {"kind": "topdown", **({"lowest_level": lowest} if lowest else {})}
    return {
        "audit": {"allocation": "pl94_2021_production", "replicates": 2, "seed": 11},
        "population": {"kind": "spine", "seed": 7, "spine_states": ["ST13"], "attributes": "pl94"},
        "release": release,
        "accounting": {"deltas": [1e-10], "eps_grid_points": 20},
    }


def _run(tmp_path: Path, name: str, lowest: str) -> tuple[str, str]:
    spec = tmp_path / f"{name}.toml"
    spec.write_text(to_toml(_spec(lowest)))
    url, report = str(tmp_path / f"{name}.zarr"), str(tmp_path / f"{name}.html")
    res = CliRunner().invoke(app, ["run", str(spec), "--store", url, "--report", report])
    assert res.exit_code == 0, res.output
    return url, res.stdout


def test_a_release_stopped_at_county_stores_the_whole_runs_upper_levels(tmp_path: Path) -> None:
    whole, _ = _run(tmp_path, "whole", "")
    top, out = _run(tmp_path, "top", "County")
    assert list(store.open_group(top, "residuals").geolevel.values) == ["US", "State", "County"]
    for state in (0, 1):  # the nation, the state
        for level in (0, 1, 2):
            a, b = read_residuals(whole, state, level), read_residuals(top, state, level)
            assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
            assert np.array_equal(
                read_items(whole, state, level)[0], read_items(top, state, level)[0]
            )
    assert (read_residuals(top, 1, 2)[0] != 0).any()  # noisy counties: the comparison can fail
    # what the composed row composes: the whole allocation, the levels below named
    words = "the allocation's 6 levels (the 3 here and Tract, Block_Group, Block, not simulated)"
    assert " ".join(out.split()).count(words) == 1
    # the prose is wrapped at 80 columns; a path or a link is printed whole after its label
    assert [ln for ln in out.splitlines() if len(ln) > 80 and len(ln.split()) != 2] == []
    page = " ".join(html.unescape(Path(tmp_path / "top.html").read_text()).split())
    assert f"composing {words}, the exact ε is" in page
    assert "down to County (Tract, Block_Group, Block not simulated)" in page  # the header
