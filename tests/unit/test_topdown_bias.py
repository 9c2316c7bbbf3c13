"""A TopDown audit stores the bias of its unit totals conditional on the truth: the mean released −
true total of empty and of populated units, and of the populated ones by true total (1–9, 10–99,
100–999, ≥ 1000), per geolevel (the ``epl`` group's ``total_bias``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from auditlib import seeds
from auditlib.epl import EPLKnobs
from auditlib.geography import NATIONAL
from auditlib.simulate.topdown import TOPDOWN_NOISE, replicates
from auditlib.simulate.topdown_residuals import total_bias_sums
from flows.audit import epl_level, tasks
from flows.audit.blocks import state_population
from flows.audit.groups import epl_dataset
from flows.spec import parse_spec
from flows.spec.audit_plan import AuditPlan
from flows.spec.plan import make_plan
from storage import store
from storage.result_store import ResultStore

SPEC = {
    "audit": {"allocation": "pl94_2021_production", "replicates": 4, "seed": 2},
    "population": {
        "states": 2,
        "fanout": {"County": 2, "Tract": 2, "Block_Group": 2, "Block": 6},
        "attributes": "pl94",
        "mean_block_population": 6.0,
        "empty_block_share": 0.4,
    },
    "release": {"kind": "topdown"},
}


def _reference(plan, geolevel: str) -> list[float]:
    """Mean released − true total of empty, populated, 1–9, 10–99, 100–999 and ≥ 1000 units at
    ``geolevel``, from the releases themselves (the library's runs on the keyed streams the audit
    uses), not from the store."""
    from auditlib.geography.schema import schema

    sch = schema("pl94")
    q = {name: sch.query_matrix(name) for name in sch.query_names}
    gis = [plan.geolevels.index(g) for g in plan.hierarchy.geolevels]
    bounds = [(0, 0), (1, np.inf), (1, 9), (10, 99), (100, 999), (1000, np.inf)]
    diffs: list[list[np.ndarray]] = [[] for _ in bounds]
    for key in (1, 2):
        h, hist = state_population(plan, key)
        runs = replicates(
            h,
            hist,
            q,
            [plan.topdown.measured[plan.geolevels[gi]] for gi in gis],
            lambda r, key=key: [
                seeds.rng(plan.noise_seed, TOPDOWN_NOISE, key, gi, r) for gi in gis
            ],
            plan.replicates,
        )
        i = h.levels.index(geolevel)
        truth = runs[0].truth[i].sum(axis=1)
        for run in runs:
            d = run.dp[i].sum(axis=1) - truth
            for k, (lo, hi) in enumerate(bounds):
                diffs[k].append(d[(truth >= lo) & (truth <= hi)])
    means = [np.concatenate(d) for d in diffs]
    return [float(m.mean()) if m.size else np.nan for m in means]


def topdown_store(tmp_path: Path) -> tuple[str, AuditPlan]:
    """A store of :data:`SPEC`'s TopDown release: its states' blocks, then the nation's."""
    plan = make_plan(parse_spec(SPEC))
    url = str(tmp_path / "a.zarr")
    store.create_residual_template(url, **plan.template_layout(), attrs={})
    top = plan.geolevels.index("State")
    batch = tasks.simulate_topdown_states.fn(
        ResultStore.at(url), plan, list(plan.blocks_at(top)), False
    )
    nation = next(b for b in plan.blocks if b.state_key == 0)
    tasks.simulate_topdown_nation.fn(ResultStore.at(url), plan, nation, [batch])
    return url, plan


def test_the_epl_group_stores_the_bias_of_unit_totals_by_truth(tmp_path: Path) -> None:
    spec = parse_spec(SPEC)
    url, plan = topdown_store(tmp_path)
    results = [
        epl_level.epl_geolevel(
            ResultStore.at(url), plan, g, EPLKnobs(spec.epl.bandwidth_factor, spec.epl.percentiles)
        )
        for g in sorted({b.level for b in plan.blocks})
    ]
    ds = epl_dataset(plan, results, spec)
    classes = ["empty", "populated", "1–9", "10–99", "100–999", "≥ 1000"]
    bias = ds.total_bias.sel(truth_class=classes)
    units = ds.total_bias_units
    for g in ("Block", "Block_Group", "Tract"):
        np.testing.assert_allclose(bias.sel(geolevel=g).values, _reference(plan, g), rtol=1e-9)
    sizes = units.sel(truth_class=classes[2:]).sum("truth_class")
    np.testing.assert_array_equal(sizes, units.sel(truth_class="populated"))  # a partition
    blocks = bias.sel(geolevel="Block").values
    assert blocks[0] > 0.5 and blocks[1] < 0  # non-negativity lifts empty blocks, others pay
    n_blocks = 2 * 2 * 2 * 6  # per state
    every = units.sel(geolevel="Block", truth_class=["empty", "populated"]).sum()
    assert int(every) == 2 * n_blocks * plan.replicates
    # the nation: one populated unit, the sum of the invariant state totals
    assert int(units.sel(geolevel=NATIONAL, truth_class="populated")) == plan.replicates
    assert bias.sel(geolevel=NATIONAL, truth_class="populated").item() == 0.0
    assert np.isnan(bias.sel(geolevel="State", truth_class="empty").item())  # no empty state
    assert "empty" in ds.total_bias.attrs["description"]


def test_total_bias_sums_reads_any_query_of_a_block() -> None:
    """Two units: query 0 the total (1 cell), query 1 two cells; padding (−1) ignored."""
    res = np.array([[1.0, -2.0, 0.5, 0.5, -1.0, -1.0, 9.0], [3.0, 0.0, 1.0, 2.0, 0.0, 0.0, 9.0]])
    qi = np.array([0, 0, 1, 1, 1, 1, -1])
    truth = np.array([0, 5, 0, 0, 3, 2, 0])
    ui = np.array([0, 1, 0, 0, 1, 1, 0])
    sums, counts = total_bias_sums(res, qi, truth, ui)
    # unit 0 empty (4 over both runs), unit 1 of true total 5 (−2): populated and 1–9
    np.testing.assert_array_equal(sums, [4.0, -2.0, -2.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(counts, [2, 2, 2, 0, 0, 0])
    only_cells = total_bias_sums(res[:, 2:6], qi[2:6], truth[2:6], ui[2:6])  # the same from query 1
    np.testing.assert_array_equal(only_cells[0], sums)


def test_the_report_names_the_shift_by_true_total() -> None:
    from flows.report.release_basis import TotalBias

    nan = float("nan")
    sizes = (("1–9", 0.1), ("10–99", -0.5), ("100–999", nan), ("≥ 1000", nan))
    assert TotalBias("Block", 0.83, -0.2, sizes).words() == (
        "empty units' totals by +0.83 and populated ones by \u22120.20 (true total 1–9: +0.10, "
        "10–99: \u22120.50)"
    )
    # a store written before the size classes: the two classes only
    assert TotalBias("Block", 0.83, -0.2).words() == (
        "empty units' totals by +0.83 and populated ones by \u22120.20"
    )


def test_the_report_says_why_empty_units_rise_only_when_they_do() -> None:
    """Non-negativity explains a rise of the empty units' totals; the consistency clause only
    when the populated ones fall. No rise (or no empty unit): no explanation."""
    from flows.report.release_basis import TotalBias

    nan = float("nan")
    negative = "a released count cannot be negative"
    back = "takes it back from the populated ones"
    assert negative in TotalBias("Block", 0.83, -0.2).why()
    assert back in TotalBias("Block", 0.83, -0.2).why()
    assert back not in TotalBias("Block", 0.83, 0.1).why()
    assert negative in TotalBias("Block", 0.83, nan).why()
    assert TotalBias("Block", -0.1, -0.2).why() == ""
    assert TotalBias("Block", 0.0, -0.2).why() == ""
    assert TotalBias("State", nan, 0.0).why() == ""
