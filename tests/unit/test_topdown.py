"""TopDown-style release: the projection, the WLS solver and the rounding against independent
references (scipy SLSQP, KKT conditions, hand-worked cases), and the release's guarantees."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq, minimize

from auditlib import seeds
from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.simulate.postprocess import Segments, project_simplex, round_preserving
from auditlib.simulate.topdown import (
    TOPDOWN_NOISE,
    TOTAL_QUERIES,
    StateHierarchy,
    residual_blocks,
    spine_state,
    topdown,
)
from auditlib.simulate.wls import Measurements, solve_wls

# a 4-cell schema: two attributes of 2 levels each (cells a0b0, a0b1, a1b0, a1b1)
QUERIES = {
    "total": np.ones((1, 4)),
    "a": np.kron(np.eye(2), np.ones((1, 2))),
    "b": np.kron(np.ones((1, 2)), np.eye(2)),
    "detailed": np.eye(4),
}


def _slsqp(fun, n, seg, target, jac=None):
    a = np.zeros((target.size, n))
    a[seg, np.arange(n)] = 1.0
    x0 = np.maximum(a.T @ (target / np.maximum(a.sum(axis=1), 1)), 0)
    r = minimize(
        fun,
        x0,
        jac=jac,
        method="SLSQP",
        bounds=[(0, None)] * n,
        constraints=[{"type": "eq", "fun": lambda v: a @ v - target}],
        options={"ftol": 1e-12, "maxiter": 2000},
    )
    assert r.success, r.message
    return r.x


@pytest.mark.parametrize("seed", range(5))
def test_projection_matches_slsqp_and_kkt(seed):
    rng = np.random.default_rng(seed)
    seg = np.repeat(np.arange(4), [1, 3, 5, 6])
    rng.shuffle(seg)  # segments need not be contiguous
    y = rng.normal(1.0, 4.0, seg.size)
    target = np.array([2.0, 0.0, 7.5, 30.0])
    x = project_simplex(y, seg, target)
    ref = _slsqp(lambda v: 0.5 * np.sum((v - y) ** 2), y.size, seg, target, lambda v: v - y)
    np.testing.assert_allclose(x, ref, atol=1e-6)
    # KKT: x = max(y - τ_s, 0) with one τ per segment
    for s in range(4):
        m = seg == s
        assert x[m].sum() == pytest.approx(target[s], abs=1e-9)
        pos = x[m] > 0
        if pos.any():
            tau = (y[m] - x[m])[pos]
            np.testing.assert_allclose(tau, tau[0], atol=1e-9)
            assert (y[m][~pos] <= tau[0] + 1e-9).all()


def test_projection_of_skewed_and_even_segments():
    """Skewed segment sizes against root finding; even ones, a segment alone against the same
    segment beside many with target 0."""
    rng = np.random.default_rng(11)
    seg = np.concatenate([np.arange(40), np.full(200, 40)])  # 40 singletons and one of 200
    y = rng.normal(0.0, 5.0, seg.size)
    target = rng.integers(0, 20, 41).astype(float)
    x = project_simplex(y, seg, target)
    # independent reference: the threshold τ by root finding, Σ max(y − τ, 0) = target
    yb, tb = y[40:], target[40]
    tau = brentq(lambda t: np.maximum(yb - t, 0).sum() - tb, yb.min() - tb - 1, yb.max())
    ref = np.maximum(yb - tau, 0)
    np.testing.assert_allclose(x[40:], ref, atol=1e-6)
    np.testing.assert_allclose(x[:40], target[:40])  # a singleton is its target
    even = np.repeat(np.arange(12), 20)
    for s in range(12):
        m = even == s
        np.testing.assert_allclose(
            project_simplex(y[m], np.zeros(20, int), target[s : s + 1]),
            Segments(
                np.concatenate([np.zeros(20, int), np.arange(1, 100)]), [target[s]] + [0] * 99
            ).project(np.concatenate([y[m], np.zeros(99)]))[:20],
            atol=1e-12,
        )


def test_projection_hand_worked():
    # y = (3, 1, -1), sum 2: τ = 1 on the top entry alone -> (2, 0, 0)
    np.testing.assert_allclose(project_simplex([3.0, 1.0, -1.0], [0, 0, 0], [2.0]), [2, 0, 0])
    # y = (1, 1), sum 4: τ = -1 -> (2, 2); target 0 -> zeros
    np.testing.assert_allclose(project_simplex([1.0, 1.0], [0, 0], [4.0]), [2, 2])
    np.testing.assert_allclose(project_simplex([5.0, -2.0], [0, 0], [0.0]), [0, 0])


def test_rounding_hand_worked_and_properties():
    # floors (0, 1, 2) sum 3, deficit 1 goes to the larger remainder; ties to the lower index
    np.testing.assert_array_equal(round_preserving([0.5, 1.5, 2.0], [0, 0, 0], [4]), [1, 1, 2])
    np.testing.assert_array_equal(round_preserving([0.2, 0.7, 2.1], [0, 0, 0], [3]), [0, 1, 2])
    rng = np.random.default_rng(3)
    seg = rng.integers(0, 50, 2000)
    raw = rng.gamma(0.3, 5.0, seg.size)
    target = np.round(np.bincount(seg, weights=raw, minlength=50))
    x = project_simplex(raw, seg, target)
    r = round_preserving(x, seg, target)
    assert r.dtype == np.int64 and (r >= 0).all()
    np.testing.assert_array_equal(np.bincount(seg, weights=r, minlength=50), target)
    assert np.abs(r - x).max() < 1


def test_rounding_rejects_bad_input():
    with pytest.raises(InvalidParameterError, match="integer"):
        round_preserving([0.5, 0.5], [0, 0], [1.5])
    with pytest.raises(InvalidParameterError, match="not its target"):
        round_preserving([0.5, 0.5], [0, 0], [3])


@pytest.mark.parametrize("seed", range(3))
def test_wls_matches_slsqp(seed):
    rng = np.random.default_rng(seed)
    n_units, measured = 6, [("total", 1.0), ("a", 4.0), ("b", 2.0), ("detailed", 25.0)]
    noisy = [rng.normal(3.0, 4.0, (n_units, QUERIES[q].shape[0])) for q, _ in measured]
    meas = Measurements.stack(QUERIES, measured, noisy)
    parent = np.repeat([0, 1], 3)
    seg = parent[:, None] * 4 + np.arange(4)
    target = np.array([3.0, 0.0, 5.0, 7.0, 8.0, 1.0, 0.0, 2.0])
    sol = solve_wls(meas, seg, target, tol=1e-9)
    assert sol.iterations > 0 and not sol.exact

    def f(v):
        r = v.reshape(n_units, 4) @ meas.matrix.T - meas.y
        return 0.5 * np.sum(r**2 * meas.weight)

    def grad(v):
        r = v.reshape(n_units, 4) @ meas.matrix.T - meas.y
        return ((r * meas.weight) @ meas.matrix).ravel()

    ref = _slsqp(f, n_units * 4, seg.ravel(), target, grad)
    assert f(sol.x.ravel()) <= f(ref) + 1e-7
    np.testing.assert_allclose(sol.x.ravel(), ref, atol=1e-4)


def test_wls_detailed_only_is_one_projection():
    rng = np.random.default_rng(0)
    y = rng.normal(2.0, 3.0, (5, 4))
    meas = Measurements.stack(QUERIES, [("detailed", 3.0)], [y])
    seg = np.zeros((5, 1), dtype=np.int64) * 4 + np.arange(4)
    sol = solve_wls(meas, seg, [4.0, 0.0, 9.0, 2.0])
    assert sol.exact and sol.iterations == 0
    np.testing.assert_allclose(sol.x.ravel(), project_simplex(y.ravel(), seg, [4, 0, 9, 2]))


HIER = StateHierarchy.from_fanouts(("State", "County", "Tract", "Block"), (3, 4, 5))
MEASURED = [[("total", 1.0), ("detailed", 4.0)]] + [
    [("total", 2.0), ("a", 3.0), ("detailed", 9.0)]
] * 3


def _blocks(seed=1):
    return np.random.default_rng(seed).poisson(2.0, size=(60, 4))


def _rngs(seed, state=1, r=0):
    return [seeds.rng(seed, TOPDOWN_NOISE, state, i, r) for i in range(4)]


def test_release_guarantees():
    rel = topdown(HIER, _blocks(), QUERIES, MEASURED, _rngs(7))
    for i, dp in enumerate(rel.dp):
        assert dp.dtype == np.int64 and (dp >= 0).all()
        if i > 0:  # children sum to their parent in every cell
            p = HIER.parents[i - 1]
            sums = np.stack([np.bincount(p, weights=dp[:, k]) for k in range(4)], axis=1)
            np.testing.assert_array_equal(sums, rel.dp[i - 1])
    assert rel.dp[0].sum() == rel.truth[0].sum()  # the invariant state total
    # marginals consistent: a parent's released marginal is the sum of its children's
    dp_a, _ = rel.marginal(2, QUERIES["a"])
    up_a, _ = rel.marginal(1, QUERIES["a"])
    np.testing.assert_array_equal(
        np.stack([np.bincount(HIER.parents[1], weights=dp_a[:, k]) for k in range(2)], 1), up_a
    )
    assert (rel.dp[3] != rel.truth[3]).any()  # noise did something


def test_release_is_exact_without_noise_and_deterministic():
    tiny = [[(q, 1e-4) for q, _ in level] for level in MEASURED]  # N_Z(0, 1e-4) is 0 w.p. ≈ 1
    rel = topdown(HIER, _blocks(), QUERIES, tiny, _rngs(7))
    for dp, t in zip(rel.dp, rel.truth, strict=True):
        np.testing.assert_array_equal(dp, t)
    a = topdown(HIER, _blocks(), QUERIES, MEASURED, _rngs(7))
    b = topdown(HIER, _blocks(), QUERIES, MEASURED, _rngs(7))
    c = topdown(HIER, _blocks(), QUERIES, MEASURED, _rngs(8))
    for x, y in zip(a.dp, b.dp, strict=True):
        np.testing.assert_array_equal(x, y)
    assert any((x != y).any() for x, y in zip(a.dp, c.dp, strict=True))


def test_total_only_residual_variance():
    """Two levels, counts far from 0 (non-negativity never binds): children's L2 estimate is
    y_c − mean(y) + parent, so the residual variance is σ²(1 − 1/f) (+ rounding, ≤ 1/4)."""
    f, sigma2, n = 4, 9.0, 3000
    h = StateHierarchy(("State", "Block"), (np.repeat(np.arange(n), f),), n_top=n)
    blocks = np.full((n * f, 1), 1000)
    res = residual_blocks(
        h,
        blocks,
        TOTAL_QUERIES,
        [[("total", sigma2)], [("total", sigma2)]],
        {"total": 0},
        lambda r: [seeds.rng(5, TOPDOWN_NOISE, 1, i, r) for i in range(2)],
        1,
    )
    assert (res[0].residual == 0).all()  # the invariant
    v = res[1].residual.var()
    expected = sigma2 * (1 - 1 / f)
    assert abs(v - expected) < 0.6  # ≈ 4 standard errors plus the rounding term
    assert abs(v - sigma2) > 1.5  # the unprojected noise variance is rejected


def test_residual_block_layout():
    res = residual_blocks(
        HIER,
        _blocks(),
        QUERIES,
        MEASURED,
        {"total": 0, "a": 1, "b": 2, "detailed": 3},
        lambda r: _rngs(3, r=r),
        2,
    )
    assert [b.n_items for b in res] == [5, 3 * 7, 12 * 7, 60 * 7]
    b = res[1]
    assert b.residual.shape == (2, 21) and b.residual.dtype == np.float32
    np.testing.assert_array_equal(b.query_index[:3], [0, 0, 0])
    np.testing.assert_array_equal(b.unit_index[3:9], [0, 0, 1, 1, 2, 2])
    assert (res[0].residual[:, 0] == 0).all()  # state total invariant


def test_spine_states():
    from auditlib.geography import generate_spine, tallies_2020

    spine = generate_spine(3, totals={"US": tallies_2020()["US"].scaled(0.002)})
    pops = spine.populations()
    for s in (0, spine.n_states - 1):
        h, bp = spine_state(spine, s)
        assert h.levels == ("State", "County", "Tract", "Block_Group", "Block")
        assert int(bp.sum()) == int(pops["State"][s])
        rel = topdown(h, bp, TOTAL_QUERIES, [[("total", 5.0)]] * 5, _rngs(1, s)[:1] * 5)
        assert rel.dp[0][0, 0] == pops["State"][s]
        assert rel.dp[-1].sum() == pops["State"][s] and (rel.dp[-1] >= 0).all()


def test_bad_inputs():
    with pytest.raises(InvalidParameterError, match="integers >= 0"):
        topdown(HIER, -_blocks(), QUERIES, MEASURED, _rngs(1))
    with pytest.raises(UnknownNameError, match="'race'"):
        topdown(HIER, _blocks(), QUERIES, [[("race", 1.0)]] * 4, _rngs(1))
    with pytest.raises(InvalidParameterError, match="has no children"):
        StateHierarchy(("State", "County", "Block"), (np.array([0, 0]), np.array([0, 0, 0])))
    with pytest.raises(InvalidParameterError, match=r"indices 0\.\.0"):
        StateHierarchy(("State", "County"), (np.array([0, 1]),))
    with pytest.raises(InvalidParameterError, match="expected \\(60, n_cells\\)"):
        topdown(HIER, _blocks()[:50], QUERIES, MEASURED, _rngs(1))
    with pytest.raises(InvalidParameterError, match="3 levels given"):
        topdown(HIER, _blocks(), QUERIES, MEASURED[:3], _rngs(1))
    with pytest.raises(InvalidParameterError, match="Invalid sigma2"):
        topdown(HIER, _blocks(), QUERIES, [[("total", -1.0)]] * 4, _rngs(1))


def test_allocation_queries_map_to_the_schema():
    from auditlib.allocations import load_allocation
    from auditlib.simulate.topdown import (
        allocation_measured,
        schema_query,
        unexpressible_queries,
    )

    names = ("total", "votingage", "race", "votingage * race", "detailed")
    alias = {"cenrace": "race"}
    assert schema_query("votingage * cenrace", names, alias) == "votingage * race"
    assert schema_query("hhgq", names, alias) is None
    assert schema_query("votingage * cenrace", names, alias, "votingage * race") == (
        "votingage * race"
    )
    assert schema_query("a * cenrace", ("detailed",), alias, "a * race") == "detailed"
    alloc = load_allocation("pl94_2021_production")
    only_total = unexpressible_queries(alloc, ("State",), ("total",))
    assert "total" not in only_total and {"cenrace", "detailed", "hhgq"} <= set(only_total)
    m = allocation_measured(alloc, ("State",), ("total",), "bounded", skip=only_total)
    total = next(b for b in alloc.select("persons", "US", "State") if b.query == "total")
    assert m == [[("total", float(1 / total.rho))]]  # bounded: σ² = 1/ρ
    # no total query in the DHC allocation: the total at the level's combined precision
    dhc = load_allocation("dhcp_20220825_paper")
    budgets = dhc.select("persons", "US", "Block")
    expect = 1 / sum(1 / (b.n_cells * float(b.sigma2("add_remove"))) for b in budgets)
    got = allocation_measured(
        dhc, ("Block",), ("total",), "add_remove", skip=[b.query for b in budgets]
    )
    assert got[0][0][1] == pytest.approx(expect, rel=1e-12)
    everything = [b.query for b in alloc.select("persons", "US", "State")]
    with pytest.raises(InvalidParameterError, match="none of its queries at 'State'"):
        allocation_measured(alloc, ("State",), ("sex",), "bounded", skip=everything)


def test_spec_and_plan():
    from auditlib.exceptions import SpecError
    from flows.spec import parse_spec
    from flows.spec.plan import make_plan

    fan = {"County": 2, "Tract": 2, "Block_Group": 2, "Block": 3}
    data = {
        "audit": {"allocation": "pl94_2021_production"},
        "population": {"states": 2, "fanout": fan, "attributes": "pl94"},
        "release": {"kind": "topdown"},
    }
    plan = make_plan(parse_spec(data))
    assert plan.release == "topdown" and plan.topdown is not None
    assert "detailed" in plan.queries and "race" in plan.queries  # cenrace -> race
    state = plan.geolevels.index("State")
    detailed = {q.name: q for _, q in plan.level_queries[state]}["detailed"]
    assert detailed.n_cells == detailed.n_sim == 28
    # measured twice (the 2,016-cell detailed and votingage * hispanic * cenrace): both precisions
    sig = [s for q, s in plan.topdown.measured["State"] if q == "detailed"]
    assert len(sig) == 2 and detailed.sigma2 == pytest.approx(1 / sum(1 / s for s in sig))
    blocks = {b.label: b.n_items for b in plan.blocks}
    assert blocks["ST01/Block"] == 24 * sum(q.n_sim for _, q in plan.level_queries[-1])
    with pytest.raises(SpecError, match=r"population\.attributes = 'sex'"):
        parse_spec({**data, "population": {**data["population"], "attributes": "sex"}})
    with pytest.raises(SpecError, match=r"needs population\.kind = 'synthetic'"):
        parse_spec({**data, "population": {"kind": "flaxman"}})


def test_spine_state_over_pl94_schema():
    """Irregular families (the spine) with 28 cells and several marginals per level."""
    from auditlib.geography import generate_spine, tallies_2020
    from auditlib.geography.populations import spine_state_histograms
    from auditlib.geography.schema import schema

    spine = generate_spine(5, totals={"US": tallies_2020()["US"].scaled(0.0005)})
    sch = schema("pl94")
    q = {name: sch.query_matrix(name) for name in sch.query_names}
    h, pops = spine_state(spine, 2)
    hist = spine_state_histograms(spine, 2, sch, seed=9)
    np.testing.assert_array_equal(hist.sum(axis=1), pops[:, 0])
    level = [("total", 2.0), ("votingage * hispanic", 8.0), ("race", 8.0), ("detailed", 20.0)]
    rel = topdown(h, hist, q, [level] * 5, _rngs(2, 3)[:1] * 5)
    assert rel.dp[0].sum() == pops.sum()
    for i in range(1, 5):
        assert (rel.dp[i] >= 0).all()
        p = h.parents[i - 1]
        sums = np.stack([np.bincount(p, weights=rel.dp[i][:, k]) for k in range(28)], axis=1)
        np.testing.assert_array_equal(sums, rel.dp[i - 1])
    assert any(it > 0 for it in rel.iterations)  # the iterative solver ran
