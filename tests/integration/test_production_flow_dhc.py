"""TopDown on the DHC production schema through the audit flow (Prefect and a real Dask cluster):
the smallest state of the seed-7 spine over the DHC's seven levels, the spine's drawn Prim and
Tract_Subset_Group included: the store has a block for each, released unit totals that keep the
state total and sum to their parents at every level, the production group counts their cells, and
the EPL has their rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from auditlib.geography.sparse_population import spine_state_sparse_population
from auditlib.geography.spine import PRIM_LEVELS
from auditlib.simulate.topdown import spine_state
from flows.spec import parse_spec
from flows.spec.plan import make_plan
from flows.spec.sources import load_spine
from storage import schema as S
from storage.residuals import open_residuals
from tests.integration._stores import undisturbed_audit
from tests.integration.test_production_flow import state_spec

# minutes: a full-size state's DHC TopDown (ST13 of the seed-7 spine: 246,980 people; 12 min wall
# on 2 cores at load 8-10, benchmarks/README.md)
pytestmark = [pytest.mark.integration, pytest.mark.slow]

SEED = 7
GEOLEVELS = (
    "State", "County", "Prim", "Tract_Subset_Group", "Tract_Subset", "Block_Group", "Block",
)  # fmt: skip


def _unit_totals(res: xr.Dataset, qid: int, n_units: int) -> np.ndarray:
    """Released totals (replicates, units) from a query whose cells partition a unit's people."""
    cols = np.flatnonzero(res.query_index.values == qid)
    released = res.truth.values[cols] + res.residual.values[:, cols].astype(np.int64)
    out = np.zeros((released.shape[0], n_units), np.int64)
    for r in range(released.shape[0]):
        np.add.at(out[r], res.unit_index.values[cols], released[r])
    return out


def test_dhc_production_state_through_the_flow(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    spine = load_spine(SEED, "US")
    st = int(np.argmin(spine.populations()["State"]))
    label = f"ST{st + 1:02d}"
    # a coarse stopping step: what is checked (the levels, the constraints, the counts) does not
    # depend on how close the fit comes to its optimum
    spec = parse_spec(
        state_spec(label, 1, "dhc_2023_production", "dhc_production",
                   release={"kind": "topdown", "tolerance": 0.05})
    )  # fmt: skip
    url = str(tmp_path / "dhc.zarr")
    summary = undisturbed_audit(spec, url, dask_address)  # run, then finalized
    assert summary["blocks"] == 1 + len(GEOLEVELS)

    plan = make_plan(spec)
    res = open_residuals(url)
    assert res.states == ["US", label] and res.geolevels == ["US", *GEOLEVELS]
    qid = list(plan.queries).index("sex * hispanic")  # its 4 cells partition a unit's people
    hierarchy, _ = spine_state(spine, st, PRIM_LEVELS)
    state_total = spine_state_sparse_population(spine, st, SEED).dhc_invariants.state_total
    released = []
    for i, (g, level) in enumerate(zip(GEOLEVELS, PRIM_LEVELS, strict=True)):
        n_units = int(spine.units_per_state(level)[st])
        assert n_units == hierarchy.n_units(i)
        rel = _unit_totals(res.sel_block(label, g), qid, n_units)
        np.testing.assert_array_equal(rel.sum(axis=1), state_total)  # the state total, exact
        if i:  # children sum to their parents, the Prim and Tract_Subset_Group included
            up = np.zeros_like(released[-1])
            np.add.at(up.T, hierarchy.parents[i - 1], rel.T)
            np.testing.assert_array_equal(up, released[-1], err_msg=g)
        released.append(rel)
    assert hierarchy.n_units(2) > hierarchy.n_units(1)  # several Prims in a county
    prod = xr.open_zarr(url, group="production")
    for g in ("Prim", "Tract_Subset_Group"):
        gi = plan.geolevels.index(g)
        n_units = hierarchy.n_units(GEOLEVELS.index(g))
        for q, p in plan.level_queries[gi]:
            assert int(prod.query_cells.values[1, gi, q]) == n_units * p.n_sim
    epl = xr.open_zarr(url, group=S.EPL)
    assert {"Prim", "Tract_Subset_Group"} <= set(epl[S.GEOLEVEL].values.tolist())
