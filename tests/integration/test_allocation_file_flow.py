"""An audit whose allocation is a file (a relative path in the spec): the real flow on Dask draws
and accounts the file's noise, and its run id follows the file's content."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pytest

from auditlib.allocations import load_allocation
from flows.cli.accounting_results import account_levels
from flows.report.render import render_report
from flows.spec.files import load_spec
from storage import schema as S
from storage import store
from storage.residuals import open_residuals
from tests.integration._residuals import padded
from tests.integration._specs import to_toml

pytestmark = pytest.mark.integration

#: a small allocation of your own: noise (σ²) or ρ per query, four levels
MINE = """geolevel,query,cells,mechanism,rho,sigma2,neighbours
US,total,1,discrete_gaussian,1/2,,add_remove
State,total,1,discrete_gaussian,,4,add_remove
State,sex,2,discrete_gaussian,1/8,,add_remove
County,total,1,discrete_gaussian,,2,add_remove
Block,sex,2,discrete_gaussian,,9,add_remove
"""
SPEC = to_toml(
    {
        "audit": {"allocation": "allocs/mine.csv", "replicates": 2},
        "population": {"states": 1, "fanout": {"County": 2, "Block": 2}},
        "accounting": {"deltas": [1e-10], "composed": False, "eps_grid_points": 20},
    }
)


def test_audit_of_an_allocation_file(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    from prefect_dask import DaskTaskRunner

    from flows.audit.flow import audit_flow, run_id_for

    (tmp_path / "allocs").mkdir()
    (tmp_path / "allocs" / "mine.csv").write_text(MINE, encoding="utf-8")
    (tmp_path / "spec.toml").write_text(SPEC, encoding="utf-8")
    spec = load_spec(tmp_path / "spec.toml")
    path = str(tmp_path / "allocs" / "mine.csv")
    assert spec.audit.allocation == path  # resolved against the spec's directory
    assert spec.geolevels == ("US", "State", "County", "Block")

    url = str(tmp_path / "a.zarr")
    flow = audit_flow.with_options(task_runner=DaskTaskRunner(address=dask_address))
    flow(spec, url, run_id_for(spec))
    store.finalize(url)

    res = padded(url)
    levels = list(res.geolevel.values)
    queries = list(res["query"].values)
    # the σ² drawn per (level, query): the file's noise, or 1/(2ρ) of a ρ row
    want = {("State", "total"): 4.0, ("State", "sex"): 4.0, ("County", "total"): 2.0}
    for (g, q), s2 in want.items():
        assert float(res.sigma2.values[levels.index(g), queries.index(q)]) == s2
    n = res.n_items.values
    for g in ("State", "County"):
        gi = levels.index(g)
        vals = res.residual.values[1, gi, :, : n[1, gi]].ravel()
        assert vals.size > 0 and np.array_equal(vals, np.round(vals))

    acc = store.open_group(url, S.ACCOUNTING)
    mine = load_allocation(path)
    ref = account_levels(mine, "add_remove", "persons", "US", list(levels), [1e-10], False)
    for row in ref["levels"]:
        got = acc.sel(geolevel=row["geolevel"], delta=1e-10)
        assert float(got.eps_exact_upper) == pytest.approx(row["epsilon"][0]["exact"], abs=1e-9)
        assert float(got.eps_bureau) == pytest.approx(row["epsilon"][0]["bureau"], rel=1e-12)
    assert float(acc.sel(geolevel="State", delta=1e-10).rho) == 0.25  # 1/(2·4) + 1/8
    # recorded by its name and content digest: no path in the store or its report
    label = "mine.csv@sha256:" + hashlib.sha256(MINE.encode()).hexdigest()[:16]
    attrs = store.root_attrs(url)
    assert attrs["allocation_id"] == label and acc.attrs["allocation"] == label
    assert f'allocation = "{label}"' in attrs["spec_toml"]
    where = str(tmp_path)
    assert not [k for k, v in {**attrs, **acc.attrs}.items() if where in str(v)]
    html = render_report(url, tmp_path / "report.html").read_text(encoding="utf-8")
    assert label in html and where not in html

    # the run id follows the file's content, not only its path
    before = run_id_for(spec)
    (tmp_path / "allocs" / "mine.csv").write_text(MINE.replace(",,4,", ",,5,"), encoding="utf-8")
    assert run_id_for(load_spec(tmp_path / "spec.toml")) != before


#: the same levels with other noise: geometric and Laplace (pure eps-DP), Gaussian (zCDP)
MIXED = """geolevel,query,cells,mechanism,sigma2,scale,sigma,neighbours
US,total,1,discrete_gaussian,2,,,add_remove
State,total,1,gaussian,,,2,add_remove
County,total,1,geometric,,3,,add_remove
County,sex,2,laplace,,2,,add_remove
Block,total,1,discrete_gaussian,9,,,add_remove
"""


@pytest.mark.slow  # an allocation file through the flow in the fast tier: the test above
@pytest.mark.parametrize("release", ["allocation", "topdown"])
def test_audit_of_a_mixed_mechanism_file(
    prefect_harness: None, dask_address: str, tmp_path: Path, release: str
) -> None:
    """Each query draws its own mechanism, the accounting composes them (as `dpaudit account`
    does), and the Bureau's zCDP conversion is n/a where a level has pure eps-DP noise, saying
    why in the store and the report."""
    from prefect_dask import DaskTaskRunner

    from flows.audit.flow import audit_flow, run_id_for

    (tmp_path / "mixed.csv").write_text(MIXED, encoding="utf-8")
    spec_dict = {
        "audit": {"allocation": "mixed.csv", "replicates": 3},
        "population": {"states": 1, "fanout": {"County": 3, "Block": 2}},
        "release": {"kind": release},
        "accounting": {"deltas": [1e-8], "eps_grid_points": 20},
    }
    (tmp_path / "spec.toml").write_text(to_toml(spec_dict), encoding="utf-8")
    spec = load_spec(tmp_path / "spec.toml")
    url = str(tmp_path / "m.zarr")
    flow = audit_flow.with_options(task_runner=DaskTaskRunner(address=dask_address))
    flow(spec, url, run_id_for(spec))
    store.finalize(url)

    res = store.open_group(url, S.RESIDUALS)
    levels, queries = list(res.geolevel.values), list(res["query"].values)
    county, total = levels.index("County"), queries.index("total")
    r = 2 * math.exp(-1 / 3) / (1 - math.exp(-1 / 3)) ** 2  # 2e^(-1/b) / (1 - e^(-1/b))^2
    assert float(res.sigma2.values[county, total]) == pytest.approx(r, rel=1e-12)
    if release == "allocation":
        assert float(res.sigma2.values[county, queries.index("sex")]) == 8.0  # 2 b^2
        blocks = open_residuals(url)
        blk = blocks.sel_block(state=blocks.states[1], geolevel="County")  # 0 is the nation
        geo = blk["residual"].values
        sex = blk["query_index"].values == queries.index("sex")
        assert np.array_equal(geo[:, ~sex], np.round(geo[:, ~sex]))  # geometric: integers
        assert not np.array_equal(geo[:, sex], np.round(geo[:, sex]))  # Laplace: reals

    acc = store.open_group(url, S.ACCOUNTING)
    ref = account_levels(
        load_allocation(str(tmp_path / "mixed.csv")),
        "add_remove",
        "persons",
        "US",
        [str(g) for g in acc.geolevel.values],
        [1e-8],
        True,
    )
    for row in ref["levels"]:
        got = acc.sel(geolevel=row["geolevel"], delta=1e-8)
        assert float(got.eps_exact_upper) == pytest.approx(
            row["epsilon"][0]["exact_upper"], abs=1e-9
        )
    c = acc.sel(geolevel="County", delta=1e-8)
    assert np.isnan(float(c.eps_bureau)) and "pure eps-DP" in acc.attrs["bureau_na"]
    s = acc.sel(geolevel="State", delta=1e-8)  # Gaussian: zCDP, its conversion stands
    assert float(s.eps_bureau) == pytest.approx(
        1 / 8 + 2 * math.sqrt(1 / 8 * math.log(1e8)), rel=1e-9
    )
    assert float(acc.composed_eps_exact_upper.sel(delta=1e-8)) == pytest.approx(
        ref["composed"]["epsilon"][0]["exact_upper"], abs=1e-9
    )
    assert np.isnan(float(acc.composed_eps_bureau.sel(delta=1e-8)))
    html = render_report(url, tmp_path / "report.html").read_text(encoding="utf-8")
    assert "n/a" in html and "pure eps-DP" in html
