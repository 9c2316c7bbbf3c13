"""The audit's EPL task streams each state's block into per-query lattice histograms and pools
them by adding histograms; its numbers must be those of the concatenated residuals.

The reference is the task as it was before streaming, ``concatenated_level`` of
``benchmarks/bench_epl.py`` (which times the two): every state's residuals concatenated in memory,
then :func:`auditlib.summaries.epl_by_query` (an independent implementation of the rows). Same
keyed seeds, so the bootstrap, null and surface draws are the same draws.

Tolerance: integer residuals give the *same* lattice counts either way (a histogram of integers is
exact, and sums of histograms are sums of integers), so every number is computed from identical
inputs; 1e-12 relative leaves room only for float summation order. Non-integer residuals (RDPC's
raked counts) are binned on a lattice of spacing s ≤ h/200: there the KDE errs by at most
``kde_error`` (≈ 4e-4 relative) and the window by at most s, so the EPL is checked to within
2·kde_error + s·max|dEPL/dx| (the log-ratio of two densities, each off by kde_error, and a window
edge moved by s).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from auditlib.epl import EPLKnobs
from flows.audit import epl_level, tasks
from flows.spec import parse_spec
from flows.spec.audit_plan import AuditPlan
from flows.spec.plan import make_plan
from storage import store

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from bench_epl import concatenated_level

from storage.result_store import ResultStore

PERC = (5.0, 95.0)
SCALARS = ("epl", "n", "bandwidth", "bias_aware", "ci_low", "ci_high", "null_upper")


def flaxman(*, replicates: int, seed: int, people: int, release: str) -> dict[str, Any]:
    """The spec mapping of a two-level Flaxman population of ``people`` (40 a location), released
    by ``release`` at ε = 1."""
    return {
        "audit": {"replicates": replicates, "seed": seed},
        "population": {"kind": "flaxman", "people": people, "levels": 2, "mean_per_location": 40},
        "release": {"kind": release, "epsilon": 1.0},
    }


def build_store(tmp_path: Path, data: dict[str, Any]) -> tuple[str, AuditPlan]:
    plan = make_plan(parse_spec(data))
    url = str(tmp_path / "a.zarr")
    store.create_residual_template(
        url,
        **plan.template_layout(),
        attrs={},
    )
    for b in plan.blocks:
        tasks.simulate_block.fn(ResultStore.at(url), plan, b)
    return url, plan


def assert_rows_equal(a: dict[str, Any] | None, b: dict[str, Any] | None) -> None:
    assert (a is None) == (b is None)
    if a is None or b is None:
        return
    assert a["status"] == b["status"]
    for k in SCALARS:
        if k in b:
            assert a[k] == pytest.approx(b[k], rel=1e-12, nan_ok=True), k
    np.testing.assert_allclose(a["x"], b["x"], rtol=1e-12)
    np.testing.assert_allclose(a["epl_x"], b["epl_x"], rtol=1e-12)
    for k in ("x", "epl_x", "low", "high"):
        np.testing.assert_allclose(a["surface"][k], b["surface"][k], rtol=1e-12, err_msg=k)


def test_streamed_level_equals_the_concatenated_residuals(tmp_path: Path) -> None:
    data = {
        "audit": {"replicates": 6, "seed": 5},
        "population": {"states": 3, "fanout": {"County": 3, "Block": 2}},
        "simulation": {"max_cells_per_query": 4},
    }
    url, plan = build_store(tmp_path, data)
    g = max(b.level for b in plan.blocks)  # the most items per state
    got = epl_level.epl_geolevel(ResultStore.at(url), plan, g, EPLKnobs(0.1, PERC))
    want = concatenated_level(url, plan, g, 0.1)
    assert got["geolevel"] == g
    assert sorted(got["per_state"]) == sorted(want["per_state"]) and len(want["per_state"]) == 3
    measured = 0
    for s, rows in want["per_state"].items():
        for a, b in zip(got["per_state"][s], rows, strict=True):
            assert_rows_equal(a, b)
            measured += b is not None
    for a, b in zip(got["pooled"], want["pooled"], strict=True):
        assert_rows_equal(a, b)
    # power: the pooled rows are not the per-state ones (the test would see a wrong pooling)
    ok = [(i, r) for i, r in enumerate(want["pooled"]) if r is not None and r["status"] == "ok"]
    assert measured >= 3 and ok
    i, row = ok[0]
    assert row["n"] == sum(rs[i]["n"] for rs in want["per_state"].values() if rs[i] is not None)


def test_raked_non_integer_residuals_are_binned_within_the_stated_error(tmp_path: Path) -> None:
    data = flaxman(replicates=40, seed=3, people=20_000, release="rdpc")
    url, plan = build_store(tmp_path, data)
    g = max(b.level for b in plan.blocks)
    r, _ = store.read_residuals(url, 0, g)
    assert not np.all(r == np.round(r))  # raking: non-integer residuals
    got = epl_level.epl_geolevel(ResultStore.at(url), plan, g, EPLKnobs(0.1, PERC))["pooled"]
    want = concatenated_level(url, plan, g, 0.1)["pooled"]
    for a, b in zip(got, want, strict=True):
        if b is None:
            assert a is None
            continue
        assert a["n"] == b["n"] and a["status"] == b["status"] == "ok"
        assert 0 < a["kde_error"] < 1e-3
        h = a["bandwidth"]
        spacing = h / 100  # ≤ h/200 from the sampled sd, which is within 2× of the pooled one
        slope = float(np.max(np.abs(np.diff(b["epl_x"])))) if b["epl_x"].size > 1 else 0.0
        tol = 2 * a["kde_error"] + spacing * (1.0 + slope)
        assert a["epl"] == pytest.approx(b["epl"], abs=tol)
        assert a["bias_aware"] == pytest.approx(b["bias_aware"], rel=0.02)
        assert a["bandwidth"] == pytest.approx(b["bandwidth"], rel=1e-3)
