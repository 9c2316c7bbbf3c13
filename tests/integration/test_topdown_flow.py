"""A TopDown-style release through the audit flow: residuals of consistent, non-negative integer
histograms in the store (checked from the store alone), EPL and accounting downstream."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from flows.spec import parse_spec
from storage import schema as S
from storage import store
from tests.integration._residuals import padded

pytestmark = pytest.mark.integration

FANOUT = {"County": 2, "Tract": 2, "Block_Group": 2, "Block": 3}


def spec(attributes: str) -> dict:
    return {
        "audit": {"allocation": "pl94_2021_production", "replicates": 3, "seed": 11},
        "population": {"states": 2, "fanout": FANOUT, "attributes": attributes},
        "release": {"kind": "topdown"},
        "accounting": {"deltas": [1e-10], "eps_grid_points": 20, "composed": False},
    }


def run(tmp_path: Path, name: str, data: dict, address: str) -> str:
    from prefect_dask import DaskTaskRunner

    from flows.audit.flow import audit_flow, run_id_for

    s = parse_spec(data)
    url = str(tmp_path / name)
    summary = audit_flow.with_options(task_runner=DaskTaskRunner(address=address))(
        s, url, run_id_for(s)
    )
    assert summary["blocks"] == 1 + 2 * 5  # the nation + 5 levels in each of 2 states
    store.finalize(url)
    return url


def released(res, state: int, level: str, query: int) -> tuple[np.ndarray, np.ndarray]:
    """(DP (replicates, units, cells), truth (units, cells)) of one query, from the store."""
    g = list(res.geolevel.values).index(level)
    n = int(res.n_items.values[state, g])
    qi = res.query_index.values[state, g, :n]
    m = qi == query
    units = res.unit_index.values[state, g, :n][m]
    cells = res.cell_index.values[state, g, :n][m]
    shape = (units.max() + 1, cells.max() + 1)
    truth = res.truth.values[state, g, :n][m].reshape(shape)
    r = res.residual.values[state, g, :, :n][:, m]
    np.testing.assert_array_equal(r, np.round(r))  # integer releases
    return (truth + r.reshape((-1, *shape))).astype(np.int64), truth


def children_sum(x: np.ndarray, fanout: int) -> np.ndarray:
    return x.reshape(x.shape[0], -1, fanout, x.shape[2]).sum(axis=2)


def test_topdown_total_and_pl94(prefect_harness: None, dask_address: str, tmp_path: Path) -> None:
    url = run(tmp_path, "t.zarr", spec("total"), dask_address)
    res = padded(url)
    assert list(res.state.values) == ["US", "ST01", "ST02"]
    assert list(res["query"].values) == ["total"]
    levels = ["State", "County", "Tract", "Block_Group", "Block"]
    for s in (1, 2):
        prev = None
        for level in levels:
            dp, truth = released(res, s, level, 0)
            assert (dp >= 0).all()
            if level == "State":
                np.testing.assert_array_equal(dp[:, 0, 0], truth[0, 0])  # invariant
            else:
                np.testing.assert_array_equal(children_sum(dp, FANOUT[level]), prev)
            prev = dp
    us, us_truth = released(res, 0, "US", 0)
    np.testing.assert_array_equal(us[:, 0, 0], us_truth[0, 0])  # the sum of invariant states
    blk = res.residual.values[1:, -1, :, : res.n_items.values[1, -1]]
    assert (blk != 0).any()  # the blocks are noisy
    acct = store.open_group(url, S.ACCOUNTING)
    assert np.isfinite(acct.eps_exact_upper.values).all()
    assert S.EPL in store.groups(url)

    url = run(tmp_path, "p.zarr", spec("pl94"), dask_address)
    res = padded(url)
    queries = list(res["query"].values)
    assert {"total", "detailed", "votingage", "race"} <= set(queries)
    d = queries.index("detailed")
    for s in (1, 2):
        prev = None
        for level in levels:
            dp, truth = released(res, s, level, d)
            assert dp.shape[2] == 28 and (dp >= 0).all()
            if level == "State":
                np.testing.assert_array_equal(dp.sum(axis=2)[:, 0], truth.sum())  # invariant
            else:  # children sum to their parent in every one of the 28 cells
                np.testing.assert_array_equal(children_sum(dp, FANOUT[level]), prev)
            prev = dp
        # marginals are consistent with the detailed histogram: votingage = cells 0..13, 14..27
        va, _ = released(res, s, "Block", queries.index("votingage"))
        det, _ = released(res, s, "Block", d)
        np.testing.assert_array_equal(va[..., 0], det[..., :14].sum(axis=2))
    epl = store.open_group(url, S.EPL)
    # every query gets a status; sparse detailed cells are mostly exact zeros after post-processing
    # (their window can be empty), the coarse marginals have an estimate
    assert (epl.epl_status.sel(geolevel="Block").values != "").all()
    assert np.isfinite(epl.epl_pooled.sel(geolevel="Block", query="votingage").values)
