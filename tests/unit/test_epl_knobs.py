"""Every EPL knob of the audit spec reaches the EPL task, and the default spec changes nothing.

References: the streamed task's pooled row of a query is compared with the library called directly
on that query's residuals concatenated in memory (:func:`auditlib.epl.estimate_epl`,
:func:`auditlib.epl.epl`) with the knob spelled out, and the same keyed seed (audit seed →
geolevel → query), so equal knobs give equal draws. Integer residuals give identical lattice
counts either way, so 1e-12 relative leaves room only for summation order. "Unchanged" is checked
against the task as the flow called it before the knobs existed (no settings: the library's
defaults) and against :func:`auditlib.summaries.epl_by_query`, the in-memory implementation.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from auditlib import seeds
from auditlib.epl import BiasAwareSettings, EPLEstimate, EPLKnobs, epl, estimate_epl
from auditlib.exceptions import InvalidParameterError, SpecError, UnknownNameError
from flows.audit import epl_level, tasks
from flows.audit.groups import epl_dataset
from flows.spec import AuditSpec, load_spec, parse_spec
from flows.spec.audit_plan import AuditPlan
from storage import store
from storage.result_store import ResultStore
from tests.unit.test_epl_geolevel_stream import (
    assert_rows_equal,
    build_store,
    concatenated_level,
    flaxman,
)

PERC = (5.0, 95.0)
SMALL = {
    "audit": {"replicates": 6, "seed": 5},
    "population": {"states": 2, "fanout": {"County": 3, "Block": 2}},
    "simulation": {"max_cells_per_query": 4, "queries": ["hispanic * sex", "detailed"]},
}


@pytest.fixture(scope="module")
def level(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, AuditPlan, int]:
    url, plan = build_store(tmp_path_factory.mktemp("knobs"), SMALL)
    return url, plan, max(b.level for b in plan.blocks)


@pytest.fixture(scope="module")
def base(level: tuple[str, AuditPlan, int]) -> list[dict[str, Any] | None]:
    """The pooled rows of the default knobs."""
    return run(level, with_epl())["pooled"]


def run(lv: tuple[str, AuditPlan, int], spec: AuditSpec) -> dict[str, Any]:
    """The EPL task as the audit flow submits it for ``spec``."""
    url, plan, g = lv
    return epl_level.epl_geolevel(ResultStore.at(url), plan, g, spec.epl.knobs())


def with_epl(**knobs: Any) -> AuditSpec:
    return parse_spec({**SMALL, "epl": knobs})


def concatenated(lv: tuple[str, AuditPlan, int], q: int) -> np.ndarray:
    url, plan, g = lv
    parts = []
    for b in plan.blocks_at(g):
        r, qi = store.read_residuals(url, b.state, b.level)
        parts.append(r[:, qi == q].ravel())
    return np.concatenate(parts)


def pooled_seed(lv: tuple[str, AuditPlan, int], q: int) -> np.random.SeedSequence:
    _, plan, g = lv
    u = int(seeds.seed_sequence(plan.noise_seed, seeds.EPL_BOOTSTRAP, g).generate_state(1)[0])
    return np.random.SeedSequence(u, spawn_key=(q,))


def pooled_reference(
    lv: tuple[str, AuditPlan, int], q: int, *, percentiles: Any = PERC, **knobs: Any
) -> EPLEstimate:
    """estimate_epl with ``knobs`` on query ``q``'s residuals of the level, concatenated, and the
    pooled row's seed: what the task's pooled row of ``q`` must give with the same knobs."""
    return estimate_epl(
        concatenated(lv, q), percentiles=percentiles, seed=pooled_seed(lv, q), **knobs
    )


def first_ok(rows: list[dict[str, Any] | None]) -> int:
    return next(q for q, r in enumerate(rows) if r is not None and r["status"] == "ok")


# --- the default spec changes nothing -----------------------------------------------------------


def test_default_spec_knobs_are_the_library_defaults() -> None:
    """The shipped spec's bias-aware knobs are estimate_epl's own defaults (h = 0.3 sd, ...)."""
    import inspect

    spec = load_spec()
    kw = spec.epl.bias_aware_settings().estimate_kwargs(spec.epl.percentiles)
    sig = inspect.signature(estimate_epl).parameters
    assert kw.pop("bandwidth") == 0.3 and sig["bandwidth"].default is None
    for k, v in kw.items():
        assert sig[k].default == v, k
    assert (
        spec.epl.range_multiplier == inspect.signature(epl).parameters["range_multiplier"].default
    )


def test_default_spec_gives_the_numbers_of_the_task_without_knobs(
    level: tuple[str, AuditPlan, int],
) -> None:
    url, plan, g = level
    spec = with_epl()  # every [epl] key at its default
    got = run(level, spec)
    # the library's defaults, not the spec's
    before = epl_level.epl_geolevel(ResultStore.at(url), plan, g, EPLKnobs(0.1, PERC))
    want = concatenated_level(url, plan, g, 0.1)  # the in-memory implementation
    for ref in (before, want):
        for a, b in zip(got["pooled"], ref["pooled"], strict=True):
            assert_rows_equal(a, b)
        for s, rows in ref["per_state"].items():
            for a, b in zip(got["per_state"][s], rows, strict=True):
                assert_rows_equal(a, b)
    assert any(r is not None and r["status"] == "ok" for r in got["pooled"])
    # integer residuals: the KDE is exact
    errs = [r["kde_error"] for r in got["pooled"] if r is not None and r["status"] == "ok"]
    assert errs and all(e == 0.0 for e in errs)


# --- each knob changes what it should ----------------------------------------------------------


def test_absolute_bandwidth_h_equals_factor_h_over_sd(
    level: tuple[str, AuditPlan, int], base: list[dict[str, Any]]
) -> None:
    q = first_ok(base)
    h = 3.0 * base[q]["bandwidth"]  # the bias-aware h: 0.3 sd = 3 × Flaxman–Petti's 0.1 sd
    absolute = run(level, with_epl(bandwidth_kind="absolute", bias_aware_bandwidth=h))["pooled"]
    for k in ("bias_aware", "ci_low", "ci_high", "null_upper"):
        assert absolute[q][k] == pytest.approx(base[q][k], rel=1e-9), k
    assert absolute[q]["epl"] == base[q]["epl"]  # Flaxman–Petti untouched
    # power: another absolute h gives another estimate
    other = run(level, with_epl(bandwidth_kind="absolute", bias_aware_bandwidth=0.5 * h))["pooled"]
    assert other[q]["bias_aware"] != pytest.approx(base[q]["bias_aware"], rel=1e-3)


def test_more_bootstrap_resamples_change_the_interval_not_the_estimate(
    level: tuple[str, AuditPlan, int], base: list[dict[str, Any]]
) -> None:
    more = run(level, with_epl(n_boot=800))["pooled"]
    q = first_ok(base)
    ref = pooled_reference(level, q, n_boot=800)
    assert more[q]["bias_aware"] == base[q]["bias_aware"]  # the point estimate has no draws
    assert more[q]["null_upper"] == base[q]["null_upper"]  # the reference draws its own stream
    assert (more[q]["ci_low"], more[q]["ci_high"]) != (base[q]["ci_low"], base[q]["ci_high"])
    assert more[q]["ci_low"] == pytest.approx(ref.ci_low, rel=1e-12)
    assert more[q]["ci_high"] == pytest.approx(ref.ci_high, rel=1e-12)


def test_confidence_and_ci_kind_reach_the_interval(
    level: tuple[str, AuditPlan, int], base: list[dict[str, Any]]
) -> None:
    q = first_ok(base)
    half = run(level, with_epl(confidence=0.5))["pooled"][q]
    # the same resamples: the 50 % interval lies inside the 90 % one, and is narrower
    assert base[q]["ci_low"] <= half["ci_low"] <= half["ci_high"] <= base[q]["ci_high"]
    assert half["ci_high"] - half["ci_low"] < base[q]["ci_high"] - base[q]["ci_low"]
    pct = run(level, with_epl(ci_kind="percentile"))["pooled"][q]
    ref = pooled_reference(level, q, ci_kind="percentile")
    assert (pct["ci_low"], pct["ci_high"]) == pytest.approx((ref.ci_low, ref.ci_high), rel=1e-12)
    assert pct["ci_low"] != pytest.approx(base[q]["ci_low"], rel=1e-6)


def test_shift_rule_window_and_reference_knobs_match_the_library(
    level: tuple[str, AuditPlan, int], base: list[dict[str, Any]]
) -> None:
    """One run with every bias-aware knob off its default against estimate_epl with the same."""
    spec = with_epl(
        bandwidth_kind="scott",
        bias_aware_percentiles=[10, 90],
        shift=2.0,
        n_boot=50,
        n_null=30,
        null_quantile=0.8,
    )
    rows = run(level, spec)["pooled"]
    q = first_ok(rows)
    r = concatenated(level, q)
    ref = pooled_reference(
        level,
        q,
        bandwidth_kind="scott",
        percentiles=(10.0, 90.0),
        shift=2.0,
        n_boot=50,
        n_null=30,
        null_quantile=0.8,
    )
    assert ref.bandwidth == pytest.approx(np.std(r, ddof=1) * r.size**-0.2, rel=1e-12)
    for k, v in (
        ("bias_aware", ref.epl),
        ("ci_low", ref.ci_low),
        ("ci_high", ref.ci_high),
        ("null_upper", ref.null_upper),
        ("inv_sigma2_hat", ref.inv_sigma2_hat),
    ):
        assert rows[q][k] == pytest.approx(v, rel=1e-12), k
    # Δ = 2 on DG noise: log p(x)/p(x+2) is about twice log p(x)/p(x+1)
    assert rows[q]["bias_aware"] > 1.5 * base[q]["bias_aware"]
    assert rows[q]["epl"] == base[q]["epl"]  # the Flaxman–Petti window is not the bias-aware one
    # the surface uses the same Δ: its grid ends Δ below the window's top
    top = float(np.nanmax(rows[q]["surface"]["x"]))
    assert top == math.floor(ref.window[1] - 2.0)


def test_range_multiplier_widens_both_windows(
    level: tuple[str, AuditPlan, int], base: list[dict[str, Any]]
) -> None:
    rows = run(level, with_epl(range_multiplier=1.5))["pooled"]
    q = first_ok(rows)
    fp = epl(concatenated(level, q), percentiles=PERC, range_multiplier=1.5)
    ba = pooled_reference(level, q, range_multiplier=1.5)
    assert rows[q]["epl"] == pytest.approx(fp.epl, rel=1e-12)
    assert rows[q]["bias_aware"] == pytest.approx(ba.epl, rel=1e-12)
    assert rows[q]["x"].size > base[q]["x"].size


# --- stored: kde_error and the knobs ------------------------------------------------------------


def test_the_epl_group_stores_kde_error_and_the_knobs(level: tuple[str, AuditPlan, int]) -> None:
    plan = level[1]
    spec = with_epl(n_boot=50, confidence=0.8, bandwidth_kind="silverman")
    ds = epl_dataset(plan, [run(level, spec)], spec)
    err = ds.kde_error.values
    measured = ds.epl_status.values == "ok"
    assert measured.any() and np.all(err[measured] == 0.0)  # integer residuals: exact
    assert np.all(np.isnan(err[ds.epl_status.values == ""]))  # nothing estimated there
    knobs = json.loads(ds.attrs["bias_aware_settings"])
    assert knobs["bandwidth_kind"] == "silverman" and knobs["n_boot"] == 50
    assert "80 % basic" in ds.attrs["bias_aware"] and "silverman" in ds.attrs["bias_aware"]
    assert "80 % basic" in ds.attrs["surface"]
    assert "kde_error" in ds.attrs
    default = epl_dataset(plan, [run(level, with_epl())], with_epl())
    assert "bandwidth 0.3 sd" in default.attrs["bias_aware"]
    assert "90 % basic" in default.attrs["surface"]


def test_raked_residuals_with_a_small_absolute_bandwidth_get_a_finer_lattice(
    tmp_path: Path,
) -> None:
    """RDPC's raked residuals are binned; an absolute h far below 0.1 sd must still be binned
    finely enough that the stored bound stays small and really bounds the estimate's error."""
    data = flaxman(replicates=10, seed=3, people=4_000, release="rdpc")
    url, plan = build_store(tmp_path, data)
    g = max(b.level for b in plan.blocks)
    lv = (url, plan, g)
    q = 0
    r = concatenated(lv, q)
    assert not np.all(r == np.round(r))
    h = 0.01 * float(np.std(r, ddof=1))  # 10× narrower than Flaxman–Petti's kernel
    spec = parse_spec(
        {**data, "epl": {"bandwidth_kind": "absolute", "bias_aware_bandwidth": h, "n_boot": 20}}
    )
    res = run(lv, spec)
    row = res["pooled"][q]
    assert row["status"] == "ok" and 0.0 < row["kde_error"] < 1e-3
    ref = estimate_epl(
        r, bandwidth=h, bandwidth_kind="absolute", n_boot=None, n_null=None, percentiles=PERC
    )
    # within the stated KDE error of both densities, plus a window edge moved by the spacing
    slope = float(np.max(np.abs(np.diff(ref.epl_x))))
    assert row["bias_aware"] == pytest.approx(ref.epl, abs=2 * row["kde_error"] + h / 100 * slope)
    # stored: the largest bound over the pooled and per-state rows
    ds = epl_dataset(plan, [res], spec)
    rows = [res["pooled"][q]] + [s[q] for s in res["per_state"].values() if s[q] is not None]
    assert float(ds.kde_error.values[g, q]) == max(x["kde_error"] for x in rows)
    # power: the lattice the Flaxman–Petti kernel alone would choose is too coarse for this h
    from auditlib.epl import LatticeHistogram, binning_error_bound, lattice_spacing

    coarse = lattice_spacing(r, 0.1)
    assert binning_error_bound(r.size, h / coarse) > 10 * row["kde_error"]
    assert LatticeHistogram(coarse).add(r).kde_error(h) > 1e-3


# --- bad knobs ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("knobs", "pattern"),
    [
        ({"bandwidth_kind": "absolute"}, r"epl\.bandwidth_kind = 'absolute': needs epl\.bias_aw"),
        (
            {"bandwidth_kind": "scott", "bias_aware_bandwidth": 0.3},
            r"epl\.bandwidth_kind = 'scott': .*bias_aware_bandwidth = 0\.3 is not used; drop it",
        ),
        ({"bandwidth_kind": "normal"}, r"epl\.bandwidth_kind = 'normal': not allowed; allowed"),
        ({"bias_aware_bandwidth": -1}, r"epl\.bias_aware_bandwidth = -1: .*greater than 0"),
        ({"bias_aware_percentiles": [95, 5]}, r"epl\.bias_aware_percentiles = \[95, 5\]: must"),
        (
            {"bias_aware_percentiles": "p"},
            r"epl\.bias_aware_percentiles = 'p': use \"percentiles\"",
        ),
        ({"n_boot": 0}, r"epl\.n_boot = 0: .*greater than 0"),
        ({"n_null": 1.5}, r"epl\.n_null = 1\.5"),
        ({"confidence": 1.0}, r"epl\.confidence = 1\.0: .*less than 1"),
        ({"null_quantile": 0}, r"epl\.null_quantile = 0: .*greater than 0"),
        ({"shift": 0}, r"epl\.shift = 0: .*greater than 0"),
        ({"range_multiplier": -2}, r"epl\.range_multiplier = -2"),
        ({"ci_kind": "bca"}, r"epl\.ci_kind = 'bca': not allowed; allowed: 'basic' or 'perc"),
    ],
)
def test_bad_knobs_are_refused_naming_the_value(knobs: dict[str, Any], pattern: str) -> None:
    with pytest.raises(SpecError, match=pattern):
        parse_spec({"epl": knobs})


def test_a_bad_knob_exits_2_from_the_cli_and_writes_nothing(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli.app import app

    spec = tmp_path / "spec.toml"
    store_path = tmp_path / "out.zarr"
    spec.write_text(
        '[epl]\nbandwidth_kind = "silverman"\nbias_aware_bandwidth = 0.3\n'
        f'[output]\nstore = "{store_path}"\nreport = "{tmp_path / "r.html"}"\n'
    )
    res = CliRunner().invoke(app, ["run", str(spec)])
    assert res.exit_code == 2, res.output
    assert "epl.bandwidth_kind = 'silverman'" in res.stderr and "drop it" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not store_path.exists()


def test_spec_round_trips_through_toml_with_a_rule() -> None:
    import tomllib

    spec = with_epl(bandwidth_kind="scott", bias_aware_percentiles=[10, 90], shift=2.0)
    again = parse_spec(tomllib.loads(spec.to_toml()))
    assert again.epl == spec.epl
    assert again.epl.bias_aware_settings() == spec.epl.bias_aware_settings()


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"bandwidth_kind": "absolute"}, InvalidParameterError, "pass h in residual units"),
        ({"bandwidth_kind": "scott", "bandwidth": 0.2}, InvalidParameterError, "drop the band"),
        ({"bandwidth_kind": "box"}, UnknownNameError, "Unknown bandwidth kind 'box'"),
        ({"bandwidth": math.inf}, InvalidParameterError, "Invalid bandwidth: inf"),
        ({"percentiles": (90, 10)}, InvalidParameterError, "Invalid percentiles"),
        ({"shift": -1.0}, InvalidParameterError, "Invalid shift: -1.0"),
        ({"n_boot": 0}, InvalidParameterError, "Invalid n_boot: 0"),
        ({"confidence": 2.0}, InvalidParameterError, "Invalid confidence: 2.0"),
        ({"ci_kind": "bca"}, UnknownNameError, "Unknown ci_kind 'bca'"),
    ],
)
def test_settings_refuse_bad_values(kwargs: dict[str, Any], error: type, pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        BiasAwareSettings(**kwargs)


def test_composed_epl_task_takes_the_knobs(tmp_path: Path) -> None:
    """Flaxman's composed EPL: default knobs give the library's defaults; a knob reaches it."""
    from auditlib.epl.composed import composed_epl
    from flows.audit.blocks import leaf_maps

    data = flaxman(replicates=10, seed=5, people=4_000, release="gdpc")
    url, plan = build_store(tmp_path, data)
    default = tasks.epl_composed.fn(ResultStore.at(url), plan, parse_spec(data).epl.knobs())
    released = [b.level for b in sorted(plan.blocks, key=lambda b: b.level)]
    levels = [store.read_residuals(url, 0, g)[0] for g in released]
    _, maps = leaf_maps(plan, released)
    seed = seeds.seed_sequence(plan.noise_seed, seeds.EPL_BOOTSTRAP, tasks.COMPOSED_EPL_KEY)
    ref = composed_epl(levels, maps, percentiles=PERC, seed=seed).to_dict()
    for k in ("epl_sum", "ci_low", "ci_high"):
        assert default[k] == ref[k]
    narrow = parse_spec({**data, "epl": {"confidence": 0.5}}).epl.knobs()
    half = tasks.epl_composed.fn(ResultStore.at(url), plan, narrow)
    assert half["epl_sum"] == default["epl_sum"]
    assert half["ci_high"] - half["ci_low"] < default["ci_high"] - default["ci_low"]
