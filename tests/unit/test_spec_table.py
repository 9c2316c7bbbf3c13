"""population.kind = "table": real counts from a CSV or Parquet file, planned as a tree for seed 001's
geometric releases; bad files and columns are refused naming them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from auditlib.exceptions import SpecError
from flows.plan import leaf_maps, make_plan, table_tree
from flows.spec import load_spec, parse_spec

CSV = "state,county,total\nB,b1,300\nA,a1,120\nB,b2,50\nA,a2,80\nB,b3,10\n"


def table_spec(path: Path, release: str = "gdpc", **population: object) -> dict:
    pop = {
        "kind": "table",
        "path": str(path),
        "counts": ["total"],
        "levels": ["state"],
        "unit": "county",
        **population,
    }
    return {"population": pop, "release": {"kind": release, "epsilon": 0.5}}


@pytest.fixture
def csv(tmp_path: Path) -> Path:
    p = tmp_path / "counties.csv"
    p.write_text(CSV)
    return p


def test_plan_of_a_table_rdpc(csv: Path) -> None:
    s = parse_spec(table_spec(csv, "rdpc"))
    assert s.geolevels == ("All", "state", "county")
    assert parse_spec(s.model_dump(mode="json")) == s
    plan = make_plan(s)
    assert plan.states == ("all",) and plan.queries == ("total",)
    # RDPC releases every level: 1 root, 2 states, 5 counties; nothing is left empty
    assert [(b.geolevel, b.n_items) for b in plan.blocks] == [(0, 1), (1, 2), (2, 5)]
    assert plan.empty == ()
    assert plan.table is not None and plan.geometric
    tree = table_tree(plan.table)
    # totals by hand from CSV: A = 120 + 80, B = 300 + 50 + 10
    assert tree.counts[0].tolist() == [560]
    assert tree.counts[1].tolist() == [200, 360]
    assert sorted(tree.counts[2].tolist()) == [10, 50, 80, 120, 300]
    n, maps = leaf_maps(plan, [0, 1, 2])
    assert n == 5 and maps[0].tolist() == [0] * 5
    # every county maps to the state whose total contains it
    sums = np.bincount(maps[1], weights=tree.counts[2])
    assert sums.tolist() == [200, 360]
    assert maps[2].tolist() == list(range(5))


def test_gdpc_releases_the_rows_only(csv: Path) -> None:
    plan = make_plan(parse_spec(table_spec(csv, "gdpc")))
    assert [(b.geolevel, b.n_items) for b in plan.blocks] == [(2, 5)]
    assert plan.empty == ((0, 0), (0, 1))


def test_no_hierarchy_columns_and_parquet(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    p = tmp_path / "rows.parquet"
    pd.DataFrame({"a": [1, 2, 3], "b": [4, 0, 6]}).to_parquet(p)
    s = parse_spec(
        {
            "population": {"kind": "table", "path": str(p), "counts": ["a", "b"]},
            "release": {"kind": "adpc"},
        }
    )
    assert s.geolevels == ("All", "unit")
    # written back out (as `dpaudit run` does with its overrides), the spec reads the same
    assert parse_spec(s.model_dump(mode="json")) == s
    plan = make_plan(s)
    assert plan.table is not None
    assert table_tree(plan.table).counts[1].tolist() == [5, 2, 9]  # a + b per row


def test_relative_path_resolves_against_the_spec_file(
    csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "audit.toml"
    spec.write_text(
        '[population]\nkind = "table"\npath = "counties.csv"\ncounts = ["total"]\n'
        'levels = ["state"]\nunit = "county"\n[release]\nkind = "gdpc"\n'
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    s = load_spec(spec)
    assert Path(s.population.path) == csv.resolve()
    # a spec given as data resolves against the working directory
    monkeypatch.chdir(tmp_path)
    assert make_plan(parse_spec(table_spec(Path("counties.csv")))).blocks[0].n_items == 5
    monkeypatch.chdir(elsewhere)
    with pytest.raises(SpecError, match=r"counties\.csv.*no such file"):
        parse_spec(table_spec(Path("counties.csv")))


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        ({"path": "nowhere.csv"}, r"nowhere\.csv.*no such file"),
        ({"counts": ["persons"]}, r"Missing columns \['persons'\]"),
        ({"levels": ["region"]}, r"Missing columns \['region'\]"),
        ({"unit": "tract"}, r"Missing columns \['tract'\]"),
        ({"counts": []}, r"needs population\.counts"),
        ({"path": ""}, r"needs population\.path"),
        ({"levels": 2}, r"population\.levels = 2: a table names its hierarchy columns"),
        ({"states": 5}, r"population\.states is a setting of the synthetic hierarchy"),
    ],
)
def test_bad_table_is_refused(
    csv: Path, change: dict[str, object], pattern: str, tmp_path: Path
) -> None:
    data = table_spec(csv)
    data["population"].update(change)
    if change.get("path") == "nowhere.csv":
        data["population"]["path"] = str(tmp_path / "nowhere.csv")
    with pytest.raises(SpecError, match=pattern):
        parse_spec(data)


def test_table_needs_a_geometric_release_and_its_keys_need_a_table(csv: Path) -> None:
    with pytest.raises(SpecError, match=r"needs population\.kind = .*'table'"):
        parse_spec(table_spec(csv, "allocation"))
    with pytest.raises(SpecError, match=r"population\.path is a setting of a table"):
        parse_spec({"population": {"path": str(csv)}})
    with pytest.raises(SpecError, match=r"population\.levels is a setting of a table"):
        parse_spec(
            {"population": {"kind": "flaxman", "levels": ["state"]}, "release": {"kind": "gdpc"}}
        )
    bad = CSV.replace("300", "-3")
    csv.write_text(bad)
    with pytest.raises(SpecError, match=r"Invalid count -3 in column 'total'"):
        parse_spec(table_spec(csv))


def test_spine_and_table_specs_survive_being_written_back_out() -> None:
    # `dpaudit run` re-reads the spec with its overrides from a full dump: every key is then set,
    # so settings of the synthetic hierarchy are refused only where they differ from the default
    s = parse_spec(
        {"population": {"kind": "spine", "spine_states": 1}, "release": {"kind": "topdown"}}
    )
    assert parse_spec(s.model_dump(mode="json")) == s
    with pytest.raises(SpecError, match=r"population\.states is a setting of the synthetic"):
        parse_spec({"population": {"kind": "spine", "states": 5}, "release": {"kind": "topdown"}})
