"""A production state's task holding more than one replicate writes each level's block part by
part (``StreamedParts``: a few parts held, whatever the replicates) instead of holding it whole,
whose items grow with the replicates (``flows.audit.production.STREAM_FROM_REPLICATES``); the
blocks written are the held ones, item for item. One replicate's are held, as before."""

from __future__ import annotations

import numpy as np

from auditlib.simulate.release import ResidualParts
from auditlib.simulate.sparse_release import StreamedParts
from flows.audit.production import (
    STREAM_FROM_REPLICATES,
    production_blocks,
    production_runs,
    production_state,
)
from flows.spec import parse_spec
from flows.spec.plan import make_plan
from tests.unit.test_production_states import LABEL, _spec


def _plan_block(replicates: int) -> tuple:
    data = _spec([LABEL])
    data["audit"]["replicates"] = replicates
    plan = make_plan(parse_spec(data))
    block = next(b for b in plan.blocks if plan.geolevels[b.level] == "State")
    return plan, block


def test_a_task_of_several_replicates_streams_its_blocks_as_the_held_ones() -> None:
    assert STREAM_FROM_REPLICATES == 2
    plan, block = _plan_block(2)
    blocks, _, _ = production_state(plan, block)
    got = list(blocks)
    assert got and all(isinstance(b, StreamedParts) for _, b in got)
    dps, truth = production_runs(plan, block)
    held = list(production_blocks(plan, dps, truth))
    assert [g for g, _ in held] == [g for g, _ in got]
    for (_, s), (_, h) in zip(got, held, strict=True):
        assert isinstance(h, ResidualParts) and s.n_items == h.n_items > 0
        a, b = s.items(0, s.n_items), h.items(0, h.n_items)
        np.testing.assert_array_equal(a.residual, b.residual)
        for name in ("truth", "query_index", "unit_index", "cell_index"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), name)


def test_one_replicates_blocks_are_held() -> None:
    plan, block = _plan_block(1)
    blocks, _, _ = production_state(plan, block)
    assert all(isinstance(b, ResidualParts) for _, b in blocks)
