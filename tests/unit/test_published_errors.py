"""Error bars of a published table (``release.kind = "published"``) without a cluster: the spec's
checks (areas file, alpha, replicates), the plan, the replicate ranges merging into one run's
moments whatever the cut, and the store's rows against ``auditlib.published`` called directly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from auditlib.geography.schema import schema
from auditlib.published import amc_interval, amc_replicates, area_moments
from flows.audit.published_errors import (
    AREAS_GROUP,
    UNITS_GROUP,
    amc_inputs,
    amc_range,
    amc_seed,
    csv_path_for,
    errors_datasets,
    errors_frame,
    replicate_ranges,
)
from flows.spec import parse_spec
from flows.spec.plan import make_plan

LEVELS = {"US": "All", "State": "", "County": "county", "Tract": "", "Block_Group": "", "Block": "block"}  # fmt: skip


def write_published(tmp_path: Path, blocks: int = 6) -> tuple[Path, Path, list[str]]:
    """A published pl94 table of ``blocks`` blocks in 2 counties (in turn), and areas of 2
    districts crossing the counties (the first half of the blocks, the second)."""
    sch = schema("pl94")
    cells = sch.cell_labels(" * ".join(sch.attribute_names))
    rng = np.random.default_rng(7)
    names = [f"B{i:02d}" for i in range(blocks)]
    rows = ["county,block," + ",".join(cells)]
    for i, b in enumerate(names):
        h = rng.poisson(rng.gamma(0.4, 5.0, size=len(cells)))
        rows.append(f"C{i % 2},{b}," + ",".join(map(str, h)))
    table = tmp_path / "published.csv"
    table.write_text("\n".join(rows) + "\n")
    areas = tmp_path / "districts.csv"
    half = blocks // 2
    areas.write_text("block,area\n" + "".join(f"{b},D{i // half}\n" for i, b in enumerate(names)))
    return table, areas, names


def spec_data(table: Path, areas: Path | None, **release: object) -> dict[str, object]:
    return {
        "audit": {"allocation": "pl94_2021_production", "replicates": 4, "seed": 11},
        "population": {
            "kind": "table",
            "path": str(table),
            "levels": ["county"],
            "unit": "block",
            "attributes": "pl94",
        },
        "release": {
            "kind": "published",
            "levels": LEVELS,
            **({"areas": str(areas)} if areas is not None else {}),
            **release,
        },
        "cluster": {"replicates_per_task": 2},
    }


def test_replicate_ranges_cover_every_replicate_with_at_least_two_each() -> None:
    assert replicate_ranges(7, 0) == [(0, 7)]
    assert replicate_ranges(7, 3) == [(0, 3), (3, 4)]  # the tail of 1 joins the range before
    assert replicate_ranges(6, 2) == [(0, 2), (2, 2), (4, 2)]
    assert replicate_ranges(5, 1) == [(0, 2), (2, 3)]  # a range of 1 has no variance
    assert replicate_ranges(25, 25, 4) == [(0, 7), (7, 7), (14, 7), (21, 4)]  # every worker
    assert replicate_ranges(25, 5, 2) == [(0, 5), (5, 5), (10, 5), (15, 5), (20, 5)]
    for n in range(2, 12):
        for k in range(0, 6):
            for tasks in (1, 3, 20):
                rr = replicate_ranges(n, k, tasks)
                assert sum(c for _, c in rr) == n and all(c >= 2 for _, c in rr)
                assert [a for a, _ in rr] == [sum(c for _, c in rr[:i]) for i in range(len(rr))]


def test_the_plan_has_no_blocks_and_the_strategy_switches_the_audit_stages_off(
    tmp_path: Path,
) -> None:
    table, areas, _ = write_published(tmp_path)
    plan = make_plan(parse_spec(spec_data(table, areas, alpha=0.05)))
    r = plan.strategy
    assert r.kind == "published" and plan.release == "published"
    assert plan.blocks == () and plan.empty == ((0, 0), (0, 1), (0, 2))
    assert not (r.accounted or r.simulates_allocation or r.composed_epl or r.published)
    assert (r.alpha, r.areas, r.replicates_per_task, r.tasks) == (0.05, str(areas), 2, 4)  # type: ignore[attr-defined]


def test_ranges_merge_into_one_run_and_the_rows_are_auditlibs(tmp_path: Path) -> None:
    """Ranges cut 2+2 or 3+1... merge into the moments of one run of 4; the stored rows are
    ``amc_replicates`` and ``amc_interval`` called directly, the areas summed per replicate."""
    table, areas, names = write_published(tmp_path)
    plan = make_plan(parse_spec(spec_data(table, areas)))
    x = amc_inputs(plan)
    whole = amc_replicates(
        x["hierarchy"], x["published"], x["query_matrices"], x["measured"], 4, amc_seed(plan),
        areas=x["areas"], keep_bottom=True, tol=x["tol"],
    )  # fmt: skip
    merged = amc_range(plan, 0, 2).merge(amc_range(plan, 2, 2))
    for lv in whole.level_names:
        for q in whole.queries:
            a, b = whole.levels[lv][q], merged.levels[lv][q]
            np.testing.assert_array_equal(a.sum_dev, b.sum_dev)
            np.testing.assert_array_equal(a.sum_sq_dev, b.sum_sq_dev)
    ds = errors_datasets(plan, merged, 0.1, str(areas))
    units, area_ds = ds[UNITS_GROUP], ds[AREAS_GROUP]
    assert units.attrs["replicates"] == 4 and units.attrs["alpha"] == 0.1
    q = "votingage * hispanic"
    sel = (units["level"].values == "block") & (units["query"].values == q)
    m = whole.levels["block"][q]
    iv = amc_interval(m, 0.1)
    np.testing.assert_array_equal(units["published"].values[sel], m.published.ravel())
    np.testing.assert_allclose(units["variance"].values[sel], m.variance.ravel())
    np.testing.assert_array_equal(units["lower"].values[sel], iv.lower.ravel())
    np.testing.assert_array_equal(units["upper"].values[sel], iv.upper.ravel())
    order = list(units["unit"].values[sel][::4])  # unit-major, 4 cells each
    assert order == sorted(names, key=lambda b: (int(b[1:]) % 2, b))  # by county, then block
    # areas: replicate sums first (area_moments of the kept bottom counts), not unit variances
    mat = x["query_matrices"][q]
    members = {
        d: [order.index(b) for b in names[3 * k : 3 * k + 3]] for k, d in enumerate(["D0", "D1"])
    }
    am = area_moments(x["published"] @ mat.T, whole.bottom[q], members)
    asel = area_ds["query"].values == q
    np.testing.assert_allclose(area_ds["variance"].values[asel], am.variance.ravel())
    np.testing.assert_array_equal(area_ds["published"].values[asel], am.published.ravel())
    summed = np.stack([m.variance[ix].sum(axis=0) for ix in members.values()]).ravel()
    assert not np.allclose(summed, am.variance.ravel())  # the covariances count
    frame = errors_frame(units, area_ds)
    assert set(frame["level"]) == {"All", "county", "block", "areas"}
    assert (frame["lower"] <= frame["upper"]).all() and (frame["lower"] >= 0).all()


def test_the_csv_goes_beside_the_store() -> None:
    assert csv_path_for("results/audit.zarr") == Path("results/audit.errors.csv")
    assert csv_path_for("out/run/") == Path("out/run.errors.csv")


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"areas": "missing.csv"}, ["missing.csv", "no such file"]),
        ({"alpha": 1.5}, ["release.alpha = 1.5", "(0, 1)"]),
        ({"alpha": 0.0}, ["release.alpha = 0.0"]),
    ],
)
def test_bad_release_settings_are_named(
    tmp_path: Path, change: dict[str, object], words: list[str]
) -> None:
    from flows.spec.files import SpecError

    table, areas, _ = write_published(tmp_path)
    data = spec_data(table, areas)
    data["release"] = {**data["release"], **change}  # type: ignore[dict-item]
    if "areas" in change:
        data["release"]["areas"] = str(tmp_path / "missing.csv")  # type: ignore[index]
    with pytest.raises(SpecError) as err:
        parse_spec(data)
    for w in words:
        assert w in str(err.value)


def test_an_unknown_unit_or_a_missing_column_in_the_areas_file_is_named(tmp_path: Path) -> None:
    from flows.spec.files import SpecError

    table, areas, _ = write_published(tmp_path)
    areas.write_text("block,area\nB00,D0\nB99,D1\n")
    with pytest.raises(SpecError, match=r"unknown unit 'B99' \(row 1\).*'block'"):
        parse_spec(spec_data(table, areas))
    areas.write_text("blk,area\nB00,D0\n")
    with pytest.raises(SpecError, match=r"Missing columns \['block'\]"):
        parse_spec(spec_data(table, areas))


def test_published_settings_are_refused_with_other_kinds_and_one_replicate(tmp_path: Path) -> None:
    from flows.spec.files import SpecError

    table, areas, _ = write_published(tmp_path)
    data = spec_data(table, areas)
    data["release"] = {**data["release"], "kind": "topdown"}  # type: ignore[dict-item]
    with pytest.raises(SpecError, match=r'release.areas is a setting .*release.kind = "published"'):
        parse_spec(data)
    data = spec_data(table, None)
    data["audit"] = {**data["audit"], "replicates": 1}  # type: ignore[dict-item]
    with pytest.raises(SpecError, match=r"audit.replicates = 1: .*at least 2"):
        parse_spec(data)


def test_the_report_section_bins_widths_reads_the_study_and_links_the_csv(tmp_path: Path) -> None:
    from flows.report.error_bars import STUDY, error_bars_section

    table, areas, _ = write_published(tmp_path)
    plan = make_plan(parse_spec(spec_data(table, areas)))
    ds = errors_datasets(plan, amc_range(plan, 0, 2), 0.1, str(areas))
    out = tmp_path / "reports" / "r.html"
    none_yet = error_bars_section(list(ds.values()), str(tmp_path / "e.zarr"), out)
    assert none_yet is not None and none_yet.csv_href == ""  # no CSV beside the store: no link
    (tmp_path / "e.errors.csv").write_text("level\n")  # dpaudit run writes it before the report
    sec = error_bars_section(list(ds.values()), str(tmp_path / "e.zarr"), out)
    assert sec is not None and sec.level == "90" and sec.replicates == 2
    assert sec.csv_href == "../e.errors.csv" and sec.csv_name == "e.errors.csv"
    units = ds[UNITS_GROUP]
    block = (units["level"].values == "block") & (units["published"].values == 0)
    row = next(r for r in sec.rows if r["level"] == "block" and r["bin"] == "0")
    assert row["counts"] == f"{int(block.sum()):,}"
    assert [r["level"] for r in sec.rows][-1] == "areas"
    if STUDY.is_file():  # the shipped study's figures, read, not written into the code
        first = STUDY.read_text().splitlines()[2].split(",")
        assert (sec.coverage[0]["target"], sec.coverage[0]["bin"]) == (first[0], first[2])
        assert "with fewer than 25" in sec.coverage_note


def test_release_queries_restrict_the_rows_and_an_unknown_one_is_named(tmp_path: Path) -> None:
    from flows.spec.files import SpecError

    table, areas, _ = write_published(tmp_path)
    plan = make_plan(parse_spec(spec_data(table, areas, queries=["total", "votingage"])))
    ds = errors_datasets(plan, amc_range(plan, 0, 2), 0.1, str(areas))
    assert set(ds[UNITS_GROUP]["query"].values) == {"total", "votingage"}
    assert ds[AREAS_GROUP].sizes["row"] == 2 * 3  # 2 districts × (1 + 2 cells)
    with pytest.raises(SpecError, match=r"release.queries has unknown query 'age'"):
        parse_spec(spec_data(table, areas, queries=["age"]))
