"""A geolevel's EPL computed in pieces (batches of its state blocks, then one combine) is the one
pass over its blocks it replaced, value for value.

The reference, :func:`single_pass`, is the EPL task as it was before the pieces: one loop over the
level's blocks in plan order, each block read whole, each query's lattice fixed from the first
block measuring it, the histograms merged and the TopDown bias sums added as it goes. The pieces
must give the same bytes (exact equality, not a tolerance) for every way of cutting the level into
batches and every order the batches finish in: integer residuals over three states, non-integer
residuals on per-state scales (so a lattice chosen from the wrong block, or from a short sample,
shows) with a query missing from the first block, and a TopDown release with its bias sums.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from auditlib import seeds
from auditlib.epl import (
    BiasAwareSettings,
    EPLKnobs,
    LatticeHistogram,
    epl_rows,
    histograms_by_query,
    lattice_spacing,
)
from auditlib.simulate.release import ResidualBlock
from auditlib.simulate.topdown_residuals import TRUTH_CLASSES, total_bias_sums
from flows.audit import tasks
from flows.audit.batching import epl_batches
from flows.audit.epl_level import (
    combine_level,
    epl_blocks,
    epl_geolevel,
    smallest_factor,
)
from flows.spec import parse_spec
from flows.spec.audit_plan import AuditPlan
from flows.spec.plan import make_plan
from storage import store
from storage.result_store import ResultStore
from tests.unit.test_epl_geolevel_stream import build_store
from tests.unit.test_topdown_bias import topdown_store

PERC = (5.0, 95.0)
STATES = {
    "audit": {"replicates": 6, "seed": 5},
    "population": {"states": 3, "fanout": {"County": 3, "Block": 2}},
    "simulation": {"max_cells_per_query": 4},
}


def single_pass(
    url: str,
    plan: AuditPlan,
    geolevel: int,
    bandwidth_factor: float,
    percentiles: tuple[float, float],
    *,
    bias_aware: BiasAwareSettings | None = None,
) -> dict[str, Any]:
    """The level's EPL as one loop over its blocks (the task before it was cut in pieces)."""
    ba = bias_aware if bias_aware is not None else BiasAwareSettings()
    nq = len(plan.queries)
    per_state: dict[int, list[dict[str, Any] | None]] = {}
    pooled: list[LatticeHistogram | None] = [None] * nq
    spacings: list[float | None] = [None] * nq
    blocks = plan.blocks_at(geolevel)
    factor = smallest_factor(float(bandwidth_factor), ba, plan.replicates, blocks)
    knobs: dict[str, Any] = {
        "bandwidth_factor": bandwidth_factor,
        "percentiles": percentiles,
        "range_multiplier": 1.0,
        "bias_aware": ba,
    }
    k = len(TRUTH_CLASSES)
    bias_sums, bias_n = np.zeros(k), np.zeros(k, dtype=np.int64)
    for b in blocks:
        r, q = store.read_residuals(url, b.state, b.level)
        if plan.strategy.topdown_bias:
            truth, units = store.read_items(url, b.state, b.level)
            s, c = total_bias_sums(r, q, truth, units)
            bias_sums += s
            bias_n += c
            missing = plan.strategy.missing_units(plan, b.state, b.level, units)
            bias_n[0] += plan.replicates * missing
        _choose_spacings(r, q, spacings, factor, ba)
        hists = histograms_by_query(r, q, nq, [s or 1.0 for s in spacings])
        per_state[b.state] = epl_rows(
            hists,
            surface_seed=int(
                seeds.seed_sequence(
                    plan.noise_seed, seeds.EPL_BOOTSTRAP, geolevel, 1 + b.state
                ).generate_state(1)[0]
            ),
            **knobs,
        )
        for i, h in enumerate(hists):
            if h is not None:
                pooled[i] = (pooled[i] or LatticeHistogram(h.spacing)).merge(h)
    pooled_rows = epl_rows(
        pooled,
        references=[None] * nq,
        uncertainty_seed=int(
            seeds.seed_sequence(plan.noise_seed, seeds.EPL_BOOTSTRAP, geolevel).generate_state(1)[0]
        ),
        surface_seed=int(
            seeds.seed_sequence(plan.noise_seed, seeds.EPL_BOOTSTRAP, geolevel, 0).generate_state(
                1
            )[0]
        ),
        **knobs,
    )
    out = {"geolevel": geolevel, "per_state": per_state, "pooled": pooled_rows}
    out["floor_reference"] = {}
    if plan.strategy.topdown_bias:
        out["total_bias"] = {"sums": bias_sums, "counts": bias_n}
    return out


def _choose_spacings(
    residual: np.ndarray,
    query_index: np.ndarray,
    spacings: list[float | None],
    factor: float,
    bias_aware: BiasAwareSettings | None = None,
) -> None:
    """Each query's lattice from the first block measuring it, the whole block at hand."""
    absolute = bias_aware is not None and bias_aware.bandwidth_kind == "absolute"
    for q, s in enumerate(spacings):
        if s is not None:
            continue
        cols = np.flatnonzero(query_index == q)
        if cols.size:
            rows = max(1, (1 << 16) // cols.size)
            sample = residual[:rows, cols]
            spacings[q] = lattice_spacing(sample, factor)
            if absolute and bias_aware is not None:
                spacings[q] = min(
                    spacings[q] or 1.0,
                    lattice_spacing(sample, bandwidth=bias_aware.bandwidth_value()),
                )


def assert_identical(a: Any, b: Any, where: str = "") -> None:
    """Equal values of equal types, arrays byte for byte (NaN equal to NaN), dicts in one order."""
    assert type(a) is type(b), where
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_identical(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_identical(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), where
    elif isinstance(a, float):
        assert (a == b) or (np.isnan(a) and np.isnan(b)), where
    else:
        assert a == b, where


def cuts(plan: AuditPlan, g: int) -> list[list[list[int]]]:
    """Ways to cut a level's blocks (by position) into batches, the batches in finishing order:
    all in one, one a block, one a block in reverse, and a split with the first block last."""
    n = len(plan.blocks_at(g))
    idx = list(range(n))
    out = [[idx], [[i] for i in idx], [[i] for i in reversed(idx)]]
    if n > 2:
        out.append([idx[2:], [idx[1]], [idx[0]]])
    return out


def check_pieces(
    url: str,
    plan: AuditPlan,
    bias_aware: BiasAwareSettings | None = None,
    levels: list[int] | None = None,
) -> int:
    """Every level of the plan (or ``levels``), every cut: the combined pieces equal the single
    pass; returns the number of levels with more than one block."""
    multi = 0
    knobs = EPLKnobs(0.1, PERC, 1.0, bias_aware or BiasAwareSettings())
    for g in levels or sorted({b.level for b in plan.blocks}):
        want = single_pass(url, plan, g, 0.1, PERC, bias_aware=bias_aware)
        blocks = plan.blocks_at(g)
        multi += len(blocks) > 1
        for cut in cuts(plan, g):
            batches = [
                epl_blocks(ResultStore.at(url), plan, g, [blocks[i] for i in b], knobs) for b in cut
            ]
            got = tasks.epl_combine.fn(plan, g, batches, knobs)
            assert_identical(got, want, f"level {g} cut {cut}")
        assert_identical(epl_geolevel(ResultStore.at(url), plan, g, knobs), want)
    return multi


def test_pieces_of_integer_residuals_equal_the_single_pass(tmp_path: Path) -> None:
    url, plan = build_store(tmp_path, STATES)
    # few bootstrap and null draws: the pieces draw them as the single pass does, any number
    # (the default numbers: the TopDown release's test below)
    few = BiasAwareSettings(n_boot=20, n_null=20)
    assert check_pieces(url, plan, few) >= 3  # levels of three states each


def scaled_store(tmp_path: Path) -> tuple[str, AuditPlan]:
    """The three-state plan's store with non-integer residuals: state s's scaled by s (so each
    state's data would choose another lattice), a fraction added; query 0 left out of the first
    block of every level (its lattice comes from the second)."""
    plan = make_plan(parse_spec(STATES))
    url = str(tmp_path / "scaled.zarr")
    store.create_residual_template(url, **plan.template_layout(), attrs={})
    rng = np.random.default_rng(1)
    for b in plan.blocks:
        res = plan.strategy.simulate_block(plan, b)
        keep = np.ones(res.n_items, bool)
        if b == plan.blocks_at(b.level)[0] and len(plan.blocks_at(b.level)) > 1:
            keep = res.query_index != 0
        r = res.residual[:, keep] * (1 + b.state) + rng.random((plan.replicates, int(keep.sum())))
        block = ResidualBlock(
            r.astype(np.float32),
            res.truth[keep],
            res.query_index[keep],
            res.unit_index[keep],
            res.cell_index[keep],
        )
        store.write_residual_block(url, b.state, b.level, block)
    return url, plan


def test_pieces_of_binned_residuals_equal_the_single_pass(tmp_path: Path) -> None:
    url, plan = scaled_store(tmp_path)
    small = min(b.level for b in plan.blocks if len(plan.blocks_at(b.level)) > 1)
    r, _ = store.read_residuals(url, plan.blocks_at(small)[0].state, small)
    assert not np.all(r == np.round(r))
    few = {"n_boot": 10, "n_null": 10}
    pooled = single_pass(url, plan, small, 0.1, PERC, bias_aware=BiasAwareSettings(**few))
    assert any(row is not None and row["kde_error"] > 0 for row in pooled["pooled"])  # binned
    # fine lattices make long histograms: few bootstrap and null draws, on the smallest level of
    # three states and one of a few hundred items a state
    mid = max(b.level for b in plan.blocks if b.state and 200 < b.n_items < 1000)
    assert check_pieces(url, plan, BiasAwareSettings(**few), [small, mid]) == 2
    absolute = BiasAwareSettings(bandwidth=0.5, bandwidth_kind="absolute", **few)
    assert check_pieces(url, plan, absolute, [small, mid]) == 2


def test_pieces_of_a_topdown_release_equal_the_single_pass(tmp_path: Path) -> None:
    url, plan = topdown_store(tmp_path)
    assert plan.strategy.topdown_bias
    assert check_pieces(url, plan) >= 3


def test_a_missing_piece_is_refused(tmp_path: Path) -> None:
    url, plan = build_store(tmp_path, STATES)
    g = max(b.level for b in plan.blocks)
    knobs = EPLKnobs(0.1, PERC)
    pieces = epl_blocks(ResultStore.at(url), plan, g, plan.blocks_at(g)[1:], knobs)
    with pytest.raises(ValueError, match="pieces of states"):
        combine_level(plan, g, pieces, knobs)


@pytest.mark.parametrize(("workers", "per_worker"), [(1, 1), (2, 2), (4, 2), (64, 2), (3, 0)])
def test_epl_batches_cover_every_block_once(workers: int, per_worker: int) -> None:
    plan = make_plan(parse_spec(STATES))
    batches = epl_batches(plan, workers, per_worker)
    assert sorted(batches) == sorted({b.level for b in plan.blocks})
    for g, bs in batches.items():
        got = [b for batch in bs for b in batch.blocks]
        assert sorted(got, key=plan.blocks.index) == list(plan.blocks_at(g))
        assert len(got) == len(set(got))
        assert all(b.level == g for b in got)
        assert 1 <= len(bs) <= len(plan.blocks_at(g))
        if per_worker == 0:
            assert len(bs) == len(plan.blocks_at(g))
    total = sum(len(bs) for bs in batches.values())
    if per_worker:  # the budget, give or take a task a level
        assert total <= workers * per_worker + len(batches)
