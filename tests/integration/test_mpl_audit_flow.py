"""The audit flow with ``[mpl] enabled``: one MPL task per geolevel, the store's ``mpl`` group."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from auditlib.allocations import load_allocation
from auditlib.mpl.audit import mpl_geolevel
from flows.experiments.mpl_coverage import mpl_task_settings
from flows.spec import parse_spec
from storage import schema as S
from storage import store
from tests.integration._specs import tiny_spec
from tests.integration._stores import undisturbed_audit

pytestmark = pytest.mark.integration

SPEC = tiny_spec(
    audit={"seed": 11},
    accounting={"deltas": [1e-5]},
    mpl={
        "enabled": True,
        "geolevels": ["State", "Block"],
        "n": 4_000,
        "n_confidence": 10_000,
        "delta_epsilons": [0.0, 0.2],
    },
)


def test_audit_flow_writes_the_mpl_group(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    spec = parse_spec(SPEC)
    url = str(tmp_path / "a.zarr")
    undisturbed_audit(spec, url, dask_address)
    ds = store.open_group(url, S.MPL)
    assert list(ds[S.GEOLEVEL].values) == ["State", "Block"]
    assert list(ds[S.MPL_PAIR].values) == ["add", "remove", "move"]
    assert ds.loss_curve.dims == (S.GEOLEVEL, S.MPL_PAIR, S.POINT)
    assert ds.delta_lb.dims == (S.GEOLEVEL, S.MPL_EPS)
    alloc = load_allocation("dhcp_20220825_paper")
    for g in ("State", "Block"):
        rho = max(q.rho for q in alloc.select("persons", "US", g))
        s2 = float(Fraction(1) / (2 * rho))  # add/remove
        row = ds.sel({S.GEOLEVEL: g})
        assert float(row.sigma2) == pytest.approx(s2, rel=1e-12)
        r = math.ceil(2.0 * math.sqrt(s2))
        assert float(row.epsilon_c) == pytest.approx((2 * r + 1) / (2 * s2), rel=1e-12)
        t = row.loss_t.values[np.isfinite(row.loss_t.values)]
        assert t.tolist() == list(range(3 - r, 3 + r + 1))
        # the curve at t̂ of the chosen pair is the step-1 maximum
        best = list(ds[S.MPL_PAIR].values).index(str(row.best_pair.values))
        assert float(row.eps_hat) == pytest.approx(float(np.nanmax(row.loss_curve.values[best])))
        assert float(row.t_hat) in t
        assert np.all(row.delta_lb.values <= row.delta_hat.values + 1e-12)
    # State: σ² ≈ 5, the bound is informative and below ε*_C; the flags are booleans
    st = ds.sel({S.GEOLEVEL: "State"})
    assert 0.3 < float(st.lb) <= float(st.epsilon_c)
    assert ds.floor_driven.dtype == bool and ds.edge.dtype == bool
    # the flow's numbers are the pure function's (keyed streams: independent of the workers)
    direct = mpl_geolevel("Block", 7, **mpl_task_settings(spec))
    assert float(ds.sel({S.GEOLEVEL: "Block"}).lb) == direct["lb"]
