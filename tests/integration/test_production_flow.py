"""TopDown on the PL94 production schema through the audit flow (Prefect and a real Dask cluster):
the smallest spine state, its sparse releases stored as the query cells non-zero in the truth or a
replicate; the stored releases keep the state total, children sum to parents, nobody lives in a
unit type a block has none of; residuals equal release − truth recomputed by a separate TopDown
run for a sample of items; the cells left out are zero everywhere and counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

from auditlib.geography.schema import schema
from auditlib.geography.sparse_population import spine_state_sparse_population
from auditlib.simulate.sparse_topdown import noise_rngs, sparse_topdown
from auditlib.simulate.topdown import spine_state
from flows.spec import parse_spec
from flows.spec.plan import make_plan
from flows.spec.sources import load_spine
from storage import schema as S
from storage import store
from storage.residual_blocks import residual_array
from storage.residuals import open_residuals
from tests.integration._stores import assert_same_arrays, undisturbed_audit

pytestmark = pytest.mark.integration

SEED = 7  # population.seed: the spine's and the people's
SCH = schema("pl94_production")
LEVELS = ("State", "County", "Tract", "Block_Group", "Block")


def state_spec(
    label: str,
    replicates: int,
    allocation: str = "pl94_2021_production",
    attributes: str = "pl94_production",
    **sections: dict[str, Any],
) -> dict[str, Any]:
    """The spec mapping of a production TopDown of spine state ``label`` (spine seed
    :data:`SEED`), small EPL and accounting settings; ``sections`` added (``cluster={...}``)."""
    return {
        "audit": {"allocation": allocation, "replicates": replicates, "seed": 11},
        "population": {
            "kind": "spine",
            "seed": SEED,
            "spine_states": [label],
            "attributes": attributes,
        },
        "release": {"kind": "topdown"},
        "epl": {"n_boot": 20, "n_null": 20},
        "accounting": {"deltas": [1e-10], "eps_grid_points": 20, "composed": False},
        **sections,
    }


def _released(res: xr.Dataset, qid: int, n_units: int) -> tuple[np.ndarray, np.ndarray]:
    """(released (replicates, units), true (units,)) answers of a one-cell-per-unit query from a
    stored block; units without an item hold 0."""
    cols = np.flatnonzero(res.query_index.values == qid)
    units = res.unit_index.values[cols]
    truth = np.zeros(n_units, np.int64)
    truth[units] = res.truth.values[cols]
    r = res.residual.values[:, cols]
    assert np.isfinite(r).all() and (r == np.round(r)).all()
    released = np.zeros((r.shape[0], n_units), np.int64)
    released[:, units] = truth[units] + r.astype(np.int64)
    return released, truth


def _by_cell(res: xr.Dataset, qid: int) -> tuple[np.ndarray, np.ndarray]:
    """(released (replicates, cells), true (cells,)) of a query of a one-unit block."""
    cols = np.flatnonzero(res.query_index.values == qid)
    n = int(res.cell_index.values[cols].max()) + 1 if cols.size else 0
    truth = np.zeros(n, np.int64)
    truth[res.cell_index.values[cols]] = res.truth.values[cols]
    released = np.zeros((res.sizes[S.REPLICATE], n), np.int64)
    released[:, res.cell_index.values[cols]] = truth[
        res.cell_index.values[cols]
    ] + res.residual.values[:, cols].astype(np.int64)
    return released, truth


def _answer(hist, unit: np.ndarray, query: str, cell: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Entries of a sparse histogram summed per (unit, query cell) wanted, one pair at a time."""
    out = np.zeros(unit.size, np.int64)
    for k, (u, c) in enumerate(zip(unit, cell, strict=True)):
        lo, hi = hist.indptr[u], hist.indptr[u + 1]
        cells = hist.cells[lo:hi].astype(np.int64)
        hit = SCH.cells_query_index(query, cells) == c
        out[k] = int(hist.counts[lo:hi][hit].sum())
    return out


def test_pl94_production_state_through_the_flow(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    spine = load_spine(SEED, "US")
    st = int(np.argmin(spine.populations()["State"]))
    label = f"ST{st + 1:02d}"
    spec = parse_spec(state_spec(label, 2))
    url = str(tmp_path / "production.zarr")
    summary = undisturbed_audit(spec, url, dask_address)  # run, then finalized
    assert summary["blocks"] == 1 + len(LEVELS)
    check_store(url, spec, spine, st)


def check_store(url: str, spec, spine, st: int) -> None:  # type: ignore[no-untyped-def]
    """The stored releases and residuals of the run (module docstring)."""
    label = f"ST{st + 1:02d}"
    plan = make_plan(spec)
    res = open_residuals(url)
    assert res.states == ["US", label] and res.geolevels == ["US", *LEVELS]
    queries = list(plan.queries)
    assert all(len(lq) == 11 for lq in plan.level_queries[1:])  # every production query
    total = queries.index("total")
    hierarchy, _ = spine_state(spine, st)
    pop = spine_state_sparse_population(spine, st, SEED)
    state_total = pop.pl94_invariants.state_total
    # the stored releases: totals of every level's units from its "total" query
    released = {}
    for gi, level in enumerate(LEVELS):
        n_units = int(spine.units_per_state(level)[st])
        rel, truth = _released(res.sel_block(label, level), total, n_units)
        np.testing.assert_array_equal(rel.sum(axis=1), state_total)  # the state total, exact
        assert truth.sum() == state_total
        if gi:  # children sum to their parents in every replicate
            up = np.zeros_like(released[LEVELS[gi - 1]])
            np.add.at(up.T, hierarchy.parents[gi - 1], rel.T)
            np.testing.assert_array_equal(up, released[LEVELS[gi - 1]])
        released[level] = rel
    assert (released["Block"] != 0).any() and (released["Block"] != truth).any()  # noisy blocks
    q_us = plan.level_queries[0][0][0]  # the nation: the one state, cell by cell
    us, state = (_by_cell(res.sel_block(s, g), q_us) for s, g in (("US", "US"), (label, "State")))
    np.testing.assert_array_equal(us[0], state[0])
    np.testing.assert_array_equal(us[1], state[1])
    assert (us[0].sum(axis=1) == state_total).all()
    # group quarters: nobody in a unit type a block has no units of (hhgq query at Block)
    blk = res.sel_block(label, "Block")
    hhgq = queries.index("hhgq")
    cols = np.flatnonzero(blk.query_index.values == hhgq)
    u, c = blk.unit_index.values[cols], blk.cell_index.values[cols]
    rel_hhgq = blk.truth.values[cols] + blk.residual.values[:, cols].astype(np.int64)
    no_units = pop.pl94_invariants.units[u, c] == 0
    assert (rel_hhgq[:, no_units] == 0).all()  # stored or not: every such cell released 0
    assert (pop.pl94_invariants.units[u][:, 1:] == 0).any()  # GQ types absent from blocks held
    # residuals = release − truth for a sample of items, from a TopDown run of its own
    td = plan.topdown
    assert td is not None
    runs = [
        sparse_topdown(
            hierarchy.parents, hierarchy.levels, pop.pl94, pop.pl94_invariants,
            [td.measured[g] for g in LEVELS], noise_rngs(plan.noise_seed, st + 1, 5, r),
            tol=td.tol,
        )
        for r in range(2)
    ]  # fmt: skip
    rng = np.random.default_rng(0)
    for i, level in enumerate(LEVELS):
        b = res.sel_block(label, level)
        pick = rng.choice(b.sizes[S.ITEM], size=min(40, b.sizes[S.ITEM]), replace=False)
        qi = b.query_index.values[pick]
        for q in np.unique(qi):
            sel = pick[qi == q]
            unit, cell = b.unit_index.values[sel], b.cell_index.values[sel]
            true = _answer(runs[0].truth[i], unit, queries[q], cell)
            np.testing.assert_array_equal(b.truth.values[sel], true)
            stored = true > 0
            for r in range(2):
                dp = _answer(runs[r].dp[i], unit, queries[q], cell)
                np.testing.assert_array_equal(b.residual.values[r, sel], dp - true)
                stored |= dp > 0
            # an item is stored because its cell is non-zero in the truth or in a release
            assert stored.all()
    # the cells left out: zero in the truth and every replicate, counted per (state, level, query)
    prod = xr.open_zarr(url, group="production")
    assert prod.attrs["schema"] == "pl94_production"
    # the state's cost, as measured by its task (the nation's is not recorded)
    cost = prod.attrs["state_costs"]
    assert list(cost) == [label]
    assert 0 < cost[label]["cpu_s"] < 10 * cost[label]["wall_s"]
    assert cost[label]["worker_peak_rss_bytes"] > 50e6
    for gi, level in enumerate(LEVELS, start=1):
        n_units = int(spine.units_per_state(level)[st])
        for qid, q in plan.level_queries[gi]:
            stored = int((res.sel_block(label, level).query_index.values == qid).sum())
            assert int(prod.stored_cells.values[1, gi, qid]) == stored
            assert int(prod.zero_cells.values[1, gi, qid]) == n_units * q.n_sim - stored
    assert int(prod.zero_cells.values[1, -1].sum()) > 100 * int(
        prod.stored_cells.values[1, -1].sum()
    )
    assert S.EPL in store.groups(url)
    epl = xr.open_zarr(url, group=S.EPL)
    # the empty blocks' bias counts every block whose true total is 0, stored or not
    n_blocks = int(spine.units_per_state("Block")[st])
    true_blocks = _released(blk, total, n_blocks)[1]
    assert int(epl.total_bias_units.values[-1, 0]) == 2 * int((true_blocks == 0).sum())
    # among them the blocks left out (no item: true and released totals 0 in both replicates)
    assert np.unique(blk.unit_index.values).size < n_blocks


def test_replicates_in_ranges_store_what_one_task_stores(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    """A state's 3 replicates in ranges of 2 (``cluster.replicates_per_task``: a task per range,
    then one writing the state's blocks from the kept histograms) store the same values as one
    task running all 3; the ranges' histograms are gone from the published store."""
    spine = load_spine(SEED, "US")
    label = f"ST{int(np.argmin(spine.populations()['State'])) + 1:02d}"
    stores = {}
    for per_task in (2, 0):
        spec = parse_spec(state_spec(label, 3, cluster={"replicates_per_task": per_task}))
        stores[per_task] = url = str(tmp_path / f"per{per_task}.zarr")
        undisturbed_audit(spec, url, dask_address)
    split = store.groups(stores[2])
    staged = {"production_ranges", "production_state_histograms", "production_progress"}
    assert not (staged | {"production_costs"}) & set(split)
    costs = [xr.open_zarr(u, group="production").attrs["state_costs"] for u in stores.values()]
    assert all(list(c) == [label] and c[label]["cpu_s"] > 0 for c in costs)  # ranges summed
    chunks = [int(residual_array(u, "residual").chunks[0]) for u in (stores[2], stores[0])]
    assert chunks == [2, 3]  # the ranges are the residual's replicate chunks
    assert_same_arrays(stores[2], stores[0], at_least=21)
