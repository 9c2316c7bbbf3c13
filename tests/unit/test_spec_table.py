"""population.kind = "table": real counts from a CSV or Parquet file, planned as a tree for Flaxman's
geometric releases; bad files and columns are refused naming them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from auditlib.exceptions import SpecError
from flows.audit.blocks import leaf_maps
from flows.spec import load_spec, parse_spec
from flows.spec.plan import make_plan
from flows.spec.sources import table_tree

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
    assert [(b.level, b.n_items) for b in plan.blocks] == [(0, 1), (1, 2), (2, 5)]
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
    assert [(b.level, b.n_items) for b in plan.blocks] == [(2, 5)]
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


STRATA = "state,county,a,b,c\nA,a1,30,5,0\nA,a2,12,40,3\nB,b1,7,7,7\nB,b2,50,0,9\nB,b3,1,2,60\n"


def stratified(tmp_path: Path, kind: str, **release: object) -> tuple:
    from flows.audit.blocks import stratified_block

    p = tmp_path / "strata.csv"
    p.write_text(STRATA)
    data = table_spec(p, kind, counts=["a", "b", "c"])
    data["audit"] = {"replicates": 20, "seed": 9}
    data["release"].update(release)
    plan = make_plan(parse_spec(data))
    assert plan.table is not None
    return plan, stratified_block(plan, plan.table)


def test_sa3_plan_and_its_weighted_median_limits(tmp_path: Path) -> None:
    plan, b = stratified(tmp_path, "sa3", epsilon=0.3)
    assert plan.queries == ("total", "strata")
    assert [(blk.level, blk.n_items) for blk in plan.blocks] == [(2, 5 * 4)]  # rows x (1 + 3)
    # truth: each row's total, then its counts, from the CSV by hand (rows sorted A, B)
    assert b.truth[:5].tolist() == [35, 55, 21, 59, 63]
    assert b.truth[5:8].tolist() == [30, 5, 0]
    tot, strata = b.residual[:, :5], b.residual[:, 5:].reshape(20, 5, 3)
    assert (tot == strata.sum(axis=2)).all()  # L1 consistency: total = sum of released strata
    assert (b.residual != 0).any()  # noisy at eps = 0.3
    # Flaxman & Petti's appendix / module docstring: w = eps; eps_total >> eps_strata => released total = max(T~, 0),
    # and at eps_total = 100 the total's noise is 0 w.p. > 1 - 1e-40: totals exact, strata noisy
    _, exact_total = stratified(tmp_path, "sa3", epsilon=100.0, epsilon_strata=0.3)
    assert (exact_total.residual[:, :5] == 0).all()
    assert (exact_total.residual[:, 5:] != 0).any()


def test_sa4_holds_the_county_totals_invariant(tmp_path: Path) -> None:
    _, b = stratified(tmp_path, "sa4", epsilon=0.3)
    tot = b.residual[:, :5]
    # rows 0-1 are in state A, 2-4 in state B (levels = ["state"]): their totals sum exactly
    assert (tot[:, :2].sum(axis=1) == 0).all() and (tot[:, 2:].sum(axis=1) == 0).all()
    assert (tot != 0).any()  # but the rows' own totals move
    with pytest.raises(SpecError, match=r"sa4.*name one"):
        data = table_spec(tmp_path / "strata.csv", "sa4", counts=["a", "b", "c"])
        data["population"]["levels"] = []
        parse_spec(data)


def test_epsilon_strata_needs_sa3(csv: Path) -> None:
    data = table_spec(csv, "gdpc")
    data["release"]["epsilon_strata"] = 0.2
    with pytest.raises(SpecError, match=r"release\.epsilon_strata = 0\.2 is a setting of"):
        parse_spec(data)
