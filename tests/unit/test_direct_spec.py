"""Direct estimates built from an audit spec: D is exactly the population the audit simulates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from auditlib.simulate.neighbours_hist import HistogramDatabase
from flows.audit.blocks import state_population, topdown_state
from flows.spec import parse_spec
from flows.spec.plan import make_plan
from tests.integration._specs import to_toml

FANOUT = {"County": 2, "Tract": 2, "Block_Group": 2, "Block": 3}


def topdown_spec(attributes: str, **population: Any) -> dict[str, Any]:
    return {
        "audit": {"allocation": "pl94_2021_production", "replicates": 1, "seed": 11},
        "population": {"states": 2, "fanout": FANOUT, "attributes": attributes, **population},
        "release": {"kind": "topdown"},
    }


def test_synthetic_pl94_database_is_the_audits_population() -> None:
    plan = make_plan(parse_spec(topdown_spec("pl94")))
    assert plan.topdown is not None
    for key in (1, 2):
        db = HistogramDatabase.from_synthetic(plan.hierarchy, plan.population, key, "pl94")
        _, hist = state_population(plan, key)
        np.testing.assert_array_equal(db.histograms, hist)
        # the audit's own TopDown run of that state: its true counts at every level and query
        # (the store's `truth`) are those of D
        block = next(b for b in plan.blocks if b.state_key == key and b.level == 1)
        residuals, _, state_truth = topdown_state(plan, block)
        np.testing.assert_array_equal(state_truth, db.level_histograms()[0][0])
        for gi, res in residuals.items():
            level = db.level_index(plan.geolevels[gi])
            for qi in np.unique(res.query_index):
                m = res.query_index == qi
                counts = db.query_counts(level, plan.queries[qi])
                np.testing.assert_array_equal(
                    res.truth[m], counts[res.unit_index[m], res.cell_index[m]]
                )
    # the two states differ (the stream is keyed by the state)
    a = state_population(plan, 1)[1]
    b = state_population(plan, 2)[1]
    assert a.shape == b.shape and not np.array_equal(a, b)


def test_synthetic_total_database_is_the_audits_population() -> None:
    plan = make_plan(parse_spec(topdown_spec("total")))
    db = HistogramDatabase.from_synthetic(plan.hierarchy, plan.population, 2, "total")
    hier, hist = state_population(plan, 2)
    np.testing.assert_array_equal(db.histograms, hist)
    assert db.levels == hier.levels


def table_spec(tmp_path: Path, kind: str = "gdpc") -> Path:
    """Four counties in two states; county C1 is empty."""
    rows = ["state,county,persons", "S0,C0,40", "S0,C1,0", "S1,C2,25", "S1,C3,31"]
    (tmp_path / "c.csv").write_text("\n".join(rows) + "\n")
    spec = tmp_path / "t.toml"
    spec.write_text(
        '[population]\nkind = "table"\npath = "c.csv"\ncounts = ["persons"]\n'
        f'levels = ["state"]\nunit = "county"\n[release]\nkind = "{kind}"\nepsilon = 0.5\n'
    )
    return spec


def test_spec_experiments_of_every_population_kind(tmp_path: Path) -> None:
    from auditlib.simulate.direct import Allocation, Hierarchical, Stratified, TopDown
    from flows.experiments.direct_runs import SpecDirectParams, check_spec_params

    def run(data: dict[str, Any], **kw: Any) -> Any:
        return check_spec_params(SpecDirectParams(spec=parse_spec(data).to_toml(), **kw))

    alloc = {**topdown_spec("pl94"), "release": {"kind": "allocation"}}
    e = run(alloc, change="add", to_block=4, to_cell="18plus/hispanic/white", geolevel="Tract",
            query="votingage", cell="18plus", state="ST02")  # fmt: skip
    assert isinstance(e.release, Allocation) and e.state == "ST02"
    d, dp = e.truth()
    assert dp == d + 1  # 6 blocks per tract: block 4 lies in tract 0, the released unit

    def tract1(block: int, cell: str) -> tuple[int, int]:
        return run(alloc, change="add", to_block=block, to_cell=cell, geolevel="Tract", unit=1,
                   query="votingage", cell="18plus").truth()  # fmt: skip

    adult = "18plus/hispanic/white"
    assert tract1(6, adult)[1] == tract1(6, adult)[0] + 1  # block 6: tract 1
    assert tract1(5, adult)[1] == tract1(5, adult)[0]  # block 5: tract 0
    assert tract1(6, "under18/hispanic/white")[1] == tract1(6, adult)[0]  # not an adult
    e = run(topdown_spec("total"), change="remove", from_block=0, geolevel="County")
    assert isinstance(e.release, TopDown) and e.truth()[1] == e.truth()[0] - 1
    table_spec(tmp_path)
    for kind, cls, width in (
        ("gdpc", Hierarchical, 1.0),
        ("adpc", Hierarchical, 0.25),  # ADPC's values lie on Z/P, P = 4
        ("sa3", Stratified, 1.0),
    ):
        data = {"population": {"kind": "table", "path": str(tmp_path / "c.csv"),
                               "counts": ["persons"], "levels": ["state"], "unit": "county"},
                "release": {"kind": kind, "epsilon": 0.5}}  # fmt: skip
        e = run(data, change="move", from_block=0, to_block=2, unit=2)
        assert isinstance(e.release, cls) and e.truth() == (25, 26)
        p = SpecDirectParams(spec=parse_spec(data).to_toml(), change="add", to_block=1, unit=1)
        assert p.resolved_bin_width() == width


@pytest.mark.parametrize(
    ("extra", "word"),
    [
        (
            ["--change", "add", "--to-block", "0", "--level", "Tract"],
            "--level: Unknown level 'Tract'",
        ),
        (["--change", "add", "--to-block", "0", "--unit", "9"], "Invalid unit 9"),
        (["--change", "add", "--to-block", "0", "--cell", "7"], "Invalid cell 7"),
        (["--change", "add", "--to-block", "0", "--query", "race"], "--query"),
        (
            ["--change", "remove", "--from-block", "1"],
            "block 1 is empty; non-empty blocks include [0, 2, 3]",
        ),
        (["--change", "add", "--to-block", "4"], "Unknown block 4"),
        (["--change", "move", "--from-block", "0"], "needs --to-block"),
        (["--change", "swap", "--from-block", "0"], "Invalid --change: 'swap'"),
        (["--change", "add", "--to-block", "0", "--state", "ST01"], "--state 'ST01'"),
        (["--change", "add", "--to-block", "0", "--algorithm", "adpc"], "--algorithm 'adpc'"),
        (["--change", "add", "--to-block", "0", "--reps", "0"], "--reps"),
        (["--change", "add", "--to-block", "0", "--reps", "20000000"], "Invalid --reps: 20000000"),
    ],
)
def test_bad_spec_experiments_exit_2_without_a_store(
    tmp_path: Path, extra: list[str], word: str
) -> None:
    from typer.testing import CliRunner

    from flows.cli.app import app

    target = tmp_path / "d.zarr"
    args = ["direct", "--spec", str(table_spec(tmp_path)), *extra, "--store", str(target)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    assert word in res.output
    assert len(res.output.strip().splitlines()) == 1
    assert not target.exists()


def test_spine_states_that_do_not_exist_exit_2(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli.app import app

    base = {"audit": {"allocation": "pl94_2021_production", "region": "PR"},
            "population": {"kind": "spine"}, "release": {"kind": "topdown"}}  # fmt: skip
    spec = tmp_path / "pr.toml"
    for population, state, word in (
        ({}, "ST05", "Unknown --state 'ST05'; the spec's states are PR"),
        ({"spine_states": ["ST77"]}, "", "unknown state 'ST77'"),
    ):
        data = {**base, "population": {**base["population"], **population}}
        spec.write_text(to_toml(data))
        args = ["direct", "--spec", str(spec), "--change", "add", "--to-block", "0"]
        args += ["--state", state] if state else []
        res = CliRunner().invoke(app, [*args, "--store", str(tmp_path / "s.zarr")])
        assert res.exit_code == 2 and word in res.output, res.output
        assert not (tmp_path / "s.zarr").exists()


def test_flaxman_options_are_refused_with_spec_and_spec_options_without(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli.app import app

    res = CliRunner().invoke(app, ["direct", "--from-block", "3", "--store", str(tmp_path / "x")])
    assert res.exit_code == 2 and "--from-block 3" in res.output and "needs --spec" in res.output


def test_spine_spec_database_is_the_spine_state() -> None:
    from flows.experiments.direct_runs import SpecDirectParams, spec_experiment
    from flows.spec.sources import load_spine

    data = {"audit": {"allocation": "pl94_2021_production", "region": "PR", "seed": 4},
            "population": {"kind": "spine", "attributes": "pl94"},
            "release": {"kind": "topdown"}}  # fmt: skip
    plan = make_plan(parse_spec(data))
    e = spec_experiment(
        SpecDirectParams(
            spec=parse_spec(data).to_toml(), change="add", to_block=3, geolevel="Tract", unit=0
        )
    )
    assert e.state == "PR"
    ref = HistogramDatabase.from_spine(
        load_spine(plan.population.seed, "PR"), "pl94", seed=plan.population.seed, state=0
    )
    np.testing.assert_array_equal(e.pair.d.histograms, ref.histograms)
    assert e.pair.d.levels == ref.levels
    assert e.pair.d_prime.histograms.sum() == ref.histograms.sum() + 1


def test_runs_drawn_at_once_are_bounded_before_any_store() -> None:
    """A stream chunk whose runs would need more than MAX_RELEASE_BYTES is refused by the check
    made before the store (naming --stream-chunk), not by a worker's MemoryError midway."""
    from auditlib.exceptions import InvalidParameterError
    from flows.experiments.direct_runs import SpecDirectParams, check_spec_params

    spec = parse_spec(topdown_spec("pl94")).to_toml()
    kw: dict[str, Any] = {"change": "add", "to_block": 0, "geolevel": "County"}
    check_spec_params(SpecDirectParams(spec=spec, replicates=10, stream_chunk=10, **kw))
    with pytest.raises(InvalidParameterError, match=r"Invalid --stream-chunk: 5000000 runs"):
        check_spec_params(
            SpecDirectParams(spec=spec, replicates=5_000_000, stream_chunk=5_000_000, **kw)
        )
