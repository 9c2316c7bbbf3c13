"""The audit's MPL settings: spec validation, one geolevel's result, the store's mpl group."""

from __future__ import annotations

import math

import numpy as np
import pytest

from auditlib.exceptions import SpecError
from auditlib.mpl.audit import mpl_geolevel
from flows.experiments.mpl_coverage import mpl_dataset, mpl_task_settings
from flows.spec import load_spec, parse_spec
from storage import schema as S


def test_default_spec_tests_every_level_with_fdp_points_and_omitted_keeps_mpl_off() -> None:
    """`dpaudit run` with no spec tests one count per level (the report's Figure 5b and f-DP gap
    column); a spec without an [mpl] section runs none (other releases have no MPL)."""
    spec = load_spec()
    assert spec.mpl.enabled is True and spec.mpl.fdp is True
    assert spec.mpl_geolevels == spec.geolevels
    assert parse_spec({}).mpl.enabled is False
    assert parse_spec({"mpl": {"enabled": True}}).mpl_geolevels == spec.geolevels


@pytest.mark.parametrize(
    ("mpl", "match"),
    [
        ({"geolevels": ["Nope"]}, "mpl.geolevels has unknown geolevel 'Nope'"),
        ({"query": "nope"}, "mpl.query = 'nope' is not measured at US"),
        ({"alpha": 1.5}, r"mpl.alpha = 1.5"),
        ({"alpha": 0}, r"mpl.alpha = 0"),
        ({"count": 0}, "nobody to remove"),
        ({"pairs": ["add", "add"]}, "must not repeat"),
        ({"pairs": ["swap"]}, "mpl.pairs.0 = 'swap'"),
        ({"n": 10}, "mpl.n = 10"),
    ],
)
def test_bad_mpl_settings_name_the_value(mpl: dict[str, object], match: str) -> None:
    with pytest.raises(SpecError, match=match):
        parse_spec({"mpl": {"enabled": True, **mpl}})


def test_gdpc_release_tests_the_leaves() -> None:
    flax = {
        "population": {"kind": "flaxman", "people": 2000, "levels": 2, "mean_per_location": 20.0},
        "release": {"kind": "gdpc", "epsilon": 0.7},
    }
    spec = parse_spec({**flax, "mpl": {"enabled": True, "n": 2000, "n_confidence": 5000}})
    assert spec.mpl_geolevels == ("L2",)
    with pytest.raises(SpecError, match="GDPC releases the leaves only"):
        parse_spec({**flax, "mpl": {"enabled": True, "geolevels": ["L1"]}})
    r = mpl_geolevel("L2", 2, **mpl_task_settings(spec))
    assert r["epsilon_c"] == pytest.approx(0.7) and math.isnan(r["sigma2"])
    # exact δ of G(0.7) shifted by one (closed form (1 − e^{ε−ε₀})₊/(1 + e^{−ε₀}))
    eps = np.array(spec.mpl.delta_epsilons)
    ref = np.maximum(1 - np.exp(eps - 0.7), 0) / (1 + math.exp(-0.7))
    np.testing.assert_allclose(r["delta_exact"], ref, atol=1e-12)


def test_mpl_dataset_layout() -> None:
    spec = parse_spec(
        {
            "mpl": {
                "enabled": True,
                "geolevels": ["State", "County"],
                "pairs": ["add", "move"],
                "n": 2000,
                "n_confidence": 5000,
            }
        }
    )
    settings = mpl_task_settings(spec)
    res = [mpl_geolevel(g, i + 1, **settings) for i, g in enumerate(spec.mpl_geolevels)]
    ds = mpl_dataset(res, spec)
    fp = ds.sizes[S.FDP_POINT]  # the empirical f-DP points ([mpl] fdp, the default)
    assert ds.sizes == {
        S.GEOLEVEL: 2,
        S.MPL_PAIR: 2,
        S.POINT: ds.sizes[S.POINT],
        S.MPL_EPS: 4,
        S.FDP_POINT: fp,
    }
    # County has the larger σ², so the wider C: State's curve is NaN-padded
    n_state = int(np.isfinite(ds.loss_t.values[0]).sum())
    n_county = int(np.isfinite(ds.loss_t.values[1]).sum())
    assert n_state < n_county == ds.sizes[S.POINT]
    assert np.isnan(ds.loss_curve.values[0, :, n_state:]).all()
    for v in ("lb", "eps_hat", "t_hat", "f_x", "f_x_prime", "sigma_hat", "c_n", "epsilon_c"):
        assert ds[v].dims == (S.GEOLEVEL,) and np.isfinite(ds[v].values).all(), v
    assert np.isnan(ds.bandwidth.values).all()  # discrete outputs: no bandwidth
    assert set(ds.best_pair.values) <= {"add", "move"}
    assert ds.attrs["alpha"] == 0.05 and ds.attrs["n"] == 2000
