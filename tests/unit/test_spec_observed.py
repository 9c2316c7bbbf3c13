"""release.kind = "observed" in the spec: run files relative to the spec file, the plan of a
published release (every level, one replicate per run, nothing drawn), and the refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from auditlib.exceptions import SpecError
from flows.audit.blocks import release_block
from flows.spec import load_spec, parse_spec
from flows.spec.plan import make_plan

TRUTH = "state,county,total\nB,b1,300\nA,a1,120\nB,b2,50\nA,a2,80\nB,b3,10\n"
RUN0 = "state,county,total\nA,a2,83\nB,b3,9\nB,b1,297\nA,a1,121\nB,b2,50\n"
RUN1 = "state,county,total\nA,a1,118\nA,a2,80\nB,b1,302\nB,b2,55\nB,b3,7\n"


def write(tmp_path: Path, release: str) -> Path:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "truth.csv").write_text(TRUTH)
    (tmp_path / "data" / "run0.csv").write_text(RUN0)
    (tmp_path / "data" / "run1.csv").write_text(RUN1)
    spec = tmp_path / "data" / "observed.toml"
    spec.write_text(
        '[population]\nkind = "table"\npath = "truth.csv"\ncounts = ["total"]\n'
        'levels = ["state"]\nunit = "county"\n[release]\nkind = "observed"\n' + release
    )
    return spec


def test_run_files_are_found_beside_the_spec_and_read_not_drawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = write(tmp_path, 'published_files = ["run0.csv", "run1.csv"]\n')
    monkeypatch.chdir(tmp_path)  # elsewhere: the files are relative to the spec, not to here
    s = load_spec(spec)
    plan = make_plan(s)
    assert plan.geolevels == ("All", "state", "county")
    assert plan.replicates == 2 and plan.queries == ("total",)
    assert [b.n_items for b in plan.blocks] == [1, 2, 5]
    assert plan.empty == ()
    counties = release_block(plan, plan.blocks[2])
    # units sorted (A: a1, a2; B: b1, b2, b3); published minus true, run by run
    np.testing.assert_array_equal(counties.residual, [[1, 3, -3, 0, -1], [-2, 0, 2, 5, -3]])
    states = release_block(plan, plan.blocks[1])
    np.testing.assert_array_equal(states.residual, [[4, -4], [-2, 4]])
    root = release_block(plan, plan.blocks[0])
    np.testing.assert_array_equal(root.residual, [[0], [2]])
    assert root.truth.tolist() == [560]
    # the declared allocation is accounted at each of its own levels
    assert s.accounted_geolevels[:3] == ("US", "State", "County")


@pytest.mark.parametrize(
    ("release", "words"),
    [
        ("", "needs the published counts"),
        ('published_files = ["run0.csv"]\npublished = [["total"]]\n', "both given"),
        ('published_files = ["run0.csv", "nowhere.csv"]\n', "nowhere.csv': no such file"),
        ('published = [["dp"]]\n', "Missing columns ['dp']"),
    ],
)
def test_bad_observed_specs_are_refused(tmp_path: Path, release: str, words: str) -> None:
    with pytest.raises(SpecError) as err:
        load_spec(write(tmp_path, release))
    assert words in str(err.value)


def test_published_keys_belong_to_an_observed_release(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"release\.published is a setting of an observed release"):
        parse_spec({"release": {"published": [["a"]]}})
    with pytest.raises(SpecError, match=r"needs population\.kind = 'table'"):
        parse_spec({"release": {"kind": "observed"}})


def test_the_report_counts_published_runs_not_the_spec_replicates() -> None:
    from flows.report.store_data import replicates

    spec_toml = "[audit]\nreplicates = 4\n"
    assert replicates({"spec_toml": spec_toml, "published_runs": 30}, None) == 30
    assert replicates({"spec_toml": spec_toml}, None) == 4


def test_direct_refuses_a_release_it_cannot_draw(tmp_path: Path) -> None:
    """``direct --spec`` of a published release (read, not drawn): exit 2, one line naming the
    release kind and the fix, no store."""
    from typer.testing import CliRunner

    from flows.cli.app import app

    spec = write(tmp_path, 'published_files = ["run0.csv"]\n')
    target = tmp_path / "d.zarr"
    args = ["direct", "--spec", str(spec), "--change", "add", "--to-block", "0"]
    res = CliRunner().invoke(app, [*args, "--store", str(target)])
    assert res.exit_code == 2, res.output
    assert "release.kind = 'observed' is a published release" in res.output
    assert "set release.kind to the mechanism" in res.output
    assert len(res.output.strip().splitlines()) == 1
    assert not target.exists()
