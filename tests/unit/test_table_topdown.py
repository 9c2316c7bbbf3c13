"""release.kind = "topdown" on population.kind = "table": the file's own hierarchy (root, hierarchy
columns, rows) under the allocation's geolevels mapped by release.levels; the same release as the
spine's for a table of the spine's own units; bad tables and mappings refused naming row, column or
level, the CLI exiting 2 with nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from auditlib.exceptions import SpecError
from flows.audit.blocks import topdown_state
from flows.spec import load_spec, parse_spec
from flows.spec.plan import make_plan
from flows.spec.sources import load_spine

COUNTRY = Path(__file__).resolve().parents[2] / "examples" / "country"

#: pl94_2021_production (US) onto the made-up country's levels
MAPPING = {
    "US": "All",
    "State": "region",
    "County": "district",
    "Tract": "",
    "Block_Group": "",
    "Block": "village",
}


def country_spec(path: Path, levels: dict[str, str] | None = None, **population: Any) -> dict:
    return {
        "audit": {"allocation": "pl94_2021_production", "replicates": 2},
        "population": {
            "kind": "table",
            "path": str(path),
            "levels": ["region", "district"],
            "unit": "village",
            "attributes": "pl94",
            **population,
        },
        "release": {"kind": "topdown", "levels": MAPPING if levels is None else levels},
    }


@pytest.fixture(scope="module")
def country() -> pd.DataFrame:
    return pd.read_csv(COUNTRY / "country.csv")


def test_the_shipped_country_plans_on_its_own_levels(country: pd.DataFrame) -> None:
    s = load_spec(COUNTRY / "audit.toml")
    plan = make_plan(s)
    assert plan.geolevels == ("All", "region", "district", "village")
    assert plan.states == ("all",)
    assert plan.table_hierarchy is not None
    assert plan.table_hierarchy.measured_as == ("US", "State", "County", "Block")
    units = [1, country.region.nunique(), country.district.nunique(), len(country)]
    cells = [sum(q.n_sim for _, q in lq) for lq in plan.level_queries]
    assert [b.n_items for b in plan.blocks] == [u * c for u, c in zip(units, cells, strict=True)]
    # each level measures the queries of the geolevel mapped onto it, as on the synthetic
    # hierarchy of the same allocation and schema
    synthetic = make_plan(
        parse_spec(
            {
                "audit": {"allocation": "pl94_2021_production"},
                "population": {"attributes": "pl94"},
                "release": {"kind": "topdown"},
            }
        )
    ).topdown
    assert plan.topdown is not None and synthetic is not None
    for level, geolevel in zip(plan.geolevels, ("US", "State", "County", "Block"), strict=True):
        assert plan.topdown.measured[level] == synthetic.measured[geolevel]


def released_detailed(plan: Any, blocks: dict[int, Any], gi: int, n_cells: int) -> np.ndarray:
    """A level's released detailed histograms (replicates, units, cells): truth + residual of
    the stored items of the ``detailed`` query."""
    b = blocks[gi]
    cols = np.flatnonzero(b.query_index == plan.queries.index("detailed"))
    out = np.full((plan.replicates, int(b.unit_index[cols].max()) + 1, n_cells), np.nan)
    out[:, b.unit_index[cols], b.cell_index[cols]] = b.residual[:, cols] + b.truth[cols]
    return out


def test_one_topdown_run_keeps_the_root_total_and_sums_children_to_parents(
    country: pd.DataFrame,
) -> None:
    plan = make_plan(load_spec(COUNTRY / "audit.toml"))
    blocks, _, _ = topdown_state(plan, plan.blocks[0])
    cells = [c for c in country.columns if "/" in c]
    rows = country.sort_values(["region", "district", "village"]).reset_index(drop=True)
    # each unit's parent, from the file alone: regions, districts, villages in sorted order
    region, district = (pd.factorize(rows[c])[0] for c in ("region", "district"))
    parent = [
        np.zeros(region.max() + 1, dtype=int),
        pd.Series(region).groupby(district).first().to_numpy(),
        district,
    ]
    rel = [released_detailed(plan, blocks, gi, len(cells)) for gi in range(4)]
    for gi in range(4):
        assert not np.isnan(rel[gi]).any() and (rel[gi] >= 0).all()
        assert (rel[gi] == np.round(rel[gi])).all()
    for gi in range(3):  # every level's units sum to their parent's, cell by cell
        up = np.zeros_like(rel[gi])
        for r in range(plan.replicates):
            np.add.at(up[r], parent[gi], rel[gi + 1][r])
        np.testing.assert_array_equal(up, rel[gi])
    true_rows = rows[cells].to_numpy()
    detailed = blocks[3].query_index == plan.queries.index("detailed")
    np.testing.assert_array_equal(blocks[3].truth[detailed], true_rows.ravel())
    np.testing.assert_array_equal(rel[0][:, 0].sum(axis=1), true_rows.sum())  # invariant total
    assert (rel[3] != true_rows).any()  # noisy rows


def spine_table(tmp_path: Path, seed: int) -> Path:
    """Puerto Rico's spine units as a table: one row per block with its county, tract and block
    group ids (zero-padded: the file's order is the spine's) and its people."""
    sp = load_spine(seed, "PR")
    up = {"Block": np.arange(sp.n_units("Block"))}
    for level, child in (("Block_Group", "Block"), ("Tract", "Block_Group"), ("County", "Tract")):
        up[level] = sp.parents[child][up[child]]
    frame = pd.DataFrame(
        {
            "county": [f"C{i:03d}" for i in up["County"]],
            "tract": [f"T{i:04d}" for i in up["Tract"]],
            "block_group": [f"G{i:04d}" for i in up["Block_Group"]],
            "block": [f"B{i:05d}" for i in up["Block"]],
            "persons": sp.block_population,
        }
    )
    path = tmp_path / "pr.csv"
    frame.to_csv(path, index=False)
    return path


def test_a_table_of_the_spines_units_gets_the_spines_release(tmp_path: Path) -> None:
    seed = 7
    common = {
        "audit": {"allocation": "pl94_2021_production", "region": "PR", "replicates": 2, "seed": 3}
    }
    spine = parse_spec(
        {**common, "population": {"kind": "spine", "seed": seed}, "release": {"kind": "topdown"}}
    )
    table = parse_spec(
        {
            **common,
            "population": {
                "kind": "table",
                "path": str(spine_table(tmp_path, seed)),
                "levels": ["county", "tract", "block_group"],
                "unit": "block",
                "counts": ["persons"],
            },
            "release": {
                "kind": "topdown",
                "levels": {
                    "State": "All",
                    "County": "county",
                    "Tract": "tract",
                    "Block_Group": "block_group",
                    "Block": "block",
                },
            },
        }
    )
    ps, pt = make_plan(spine), make_plan(table)
    assert pt.geolevels == ("All", "county", "tract", "block_group", "block")
    assert [b.n_items for b in pt.blocks] == [b.n_items for b in ps.blocks]
    a, _, _ = topdown_state(ps, ps.blocks[0])
    b, _, _ = topdown_state(pt, pt.blocks[0])
    assert sorted(a) == sorted(b) == [0, 1, 2, 3, 4]
    for gi in a:
        np.testing.assert_array_equal(a[gi].truth, b[gi].truth)
        np.testing.assert_array_equal(a[gi].residual, b[gi].residual)
    assert (b[4].residual != 0).any()


def _edit(frame: pd.DataFrame, row: int, column: str, value: Any) -> pd.DataFrame:
    out = frame.copy()
    out[column] = out[column].astype(object)
    out.loc[row, column] = value
    return out


@pytest.mark.parametrize(
    ("edit", "population", "levels", "message"),
    [
        (lambda f: f.drop(columns=["district"]), {}, None, r"Missing columns \['district'\]"),
        (
            lambda f: _edit(f, 12, "region", "R2"),
            {},
            None,
            r"district 'D02' lies in region \['R1', 'R2'\] \(rows 12 and 13, column 'region'\)",
        ),
        (lambda f: _edit(f, 7, "district", ""), {}, None, "row 7 has no 'district' label"),
        (
            lambda f: _edit(f, 9, "18plus/hispanic/sor", None),
            {},
            None,
            r"column '18plus/hispanic/sor', row 9: missing",
        ),
        (
            lambda f: _edit(f, 9, "18plus/hispanic/sor", -3),
            {},
            None,
            r"-3 in column '18plus/hispanic/sor', row 9",
        ),
        (
            lambda f: f.drop(columns=["18plus/hispanic/sor"]),
            {},
            None,
            r"Missing columns \['18plus/hispanic/sor'\].*cells of population.attributes = 'pl94'",
        ),
        (
            lambda f: f,
            {"counts": ["persons"]},
            None,
            r"1 columns for schema 'pl94' with 28 cells.*under18/not_hispanic/white",
        ),
        (
            lambda f: f,
            {},
            {k: v for k, v in MAPPING.items() if k != "Tract"},
            "no mapping for the allocation's geolevel 'Tract'",
        ),
        (
            lambda f: f,
            {},
            {**MAPPING, "County": ""},
            "the table's level 'district' has no geolevel of the allocation",
        ),
        (
            lambda f: f,
            {},
            {**MAPPING, "Tract": "district"},
            "maps both 'County' and 'Tract' to the table's level 'district'",
        ),
        (
            lambda f: f,
            {},
            {**MAPPING, "State": "district", "County": "region"},
            "does not keep the allocation's top-down order",
        ),
        (lambda f: f, {}, {**MAPPING, "Block": "hamlet"}, "maps 'Block' to 'hamlet'"),
    ],
)
def test_bad_tables_and_mappings_are_refused(
    tmp_path: Path,
    country: pd.DataFrame,
    edit: Any,
    population: dict[str, Any],
    levels: dict[str, str] | None,
    message: str,
) -> None:
    path = tmp_path / "bad.csv"
    edit(country).to_csv(path, index=False)
    with pytest.raises(SpecError, match=message):
        parse_spec(country_spec(path, levels, **population))


def test_release_levels_belong_to_a_table_topdown() -> None:
    with pytest.raises(SpecError, match=r"release\.levels maps the allocation's geolevels"):
        parse_spec({"release": {"kind": "topdown", "levels": {"State": "State"}}})


@pytest.mark.parametrize(
    ("bad_row", "spec_edit", "message"),
    [
        (40, ("", ""), "row 40 has no 'village' label"),
        (None, ('Tract = "", ', ""), "no mapping for the allocation's geolevel 'Tract'"),
    ],
)
def test_the_cli_exits_2_naming_the_fault_and_writes_nothing(
    tmp_path: Path,
    country: pd.DataFrame,
    bad_row: int | None,
    spec_edit: tuple[str, str],
    message: str,
) -> None:
    from typer.testing import CliRunner

    from flows.cli.app import app

    table = country if bad_row is None else _edit(country, bad_row, "village", "")
    table.to_csv(tmp_path / "country.csv", index=False)
    text = (COUNTRY / "audit.toml").read_text()
    assert spec_edit[0] in text
    (tmp_path / "audit.toml").write_text(text.replace(*spec_edit))
    target = tmp_path / "out.zarr"
    res = CliRunner().invoke(
        app,
        [
            "run",
            str(tmp_path / "audit.toml"),
            "--store",
            str(target),
            "--report",
            str(tmp_path / "r.html"),
        ],
    )
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert res.output.count("dpaudit: error:") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.toml", "country.csv"]


def test_the_direct_estimate_runs_on_the_tables_own_levels() -> None:
    from flows.experiments.direct_runs import _spec_database

    db, release, label = _spec_database(load_spec(COUNTRY / "audit.toml"), "")
    assert (label, db.levels, db.n_blocks) == ("all", ("All", "region", "district", "village"), 201)
    assert type(release).__name__ == "TopDown"
