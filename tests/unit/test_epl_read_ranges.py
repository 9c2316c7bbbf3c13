"""An EPL piece reads its block's replicates in ranges of rows (``flows.audit.epl_level.read_rows``),
so that its memory does not grow with the replicates (a large state's Block level at a hundred
replicates is ~10⁹ residuals); the piece must be the one of the block read whole, byte for byte:
its histograms counted in the same order (whole steps of rows), its TopDown bias sums exact integer
sums. Checked with steps of one row and ranges of two, against the same steps read at once, on
integer residuals, binned non-integer ones (where the order of the counting shows in the last bits)
and a TopDown release with its bias sums."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from auditlib.epl import BiasAwareSettings, EPLKnobs, LatticeHistogram
from flows.audit import epl_level
from flows.spec.audit_plan import AuditPlan
from storage.result_store import ResultStore
from tests.unit.test_epl_geolevel_stream import build_store
from tests.unit.test_epl_pieces import PERC, STATES, assert_identical, scaled_store
from tests.unit.test_topdown_bias import topdown_store


def _plain(x: Any) -> Any:
    """``x`` with each histogram as its attributes (counts, lattice origin, range, binned)."""
    if isinstance(x, LatticeHistogram):
        return dict(vars(x))
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return type(x)(_plain(v) for v in x)
    return x


def _store(kind: str, tmp_path: Path) -> tuple[str, AuditPlan]:
    if kind == "integer":
        return build_store(tmp_path, STATES)
    if kind == "binned":
        return scaled_store(tmp_path)
    return topdown_store(tmp_path)


@pytest.mark.parametrize("kind", ["integer", "binned", "topdown"])
def test_a_block_read_in_ranges_is_the_block_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    url, plan = _store(kind, tmp_path)
    assert plan.replicates >= 4
    g = max(
        {b.level for b in plan.blocks}, key=lambda lv: max(b.n_items for b in plan.blocks_at(lv))
    )
    blocks = plan.blocks_at(g)
    n = max(b.n_items for b in blocks)
    knobs = EPLKnobs(0.1, PERC, 1.0, BiasAwareSettings(n_boot=10, n_null=10))
    reads: list[int] = []
    rows_of = ResultStore.read_residual_rows

    def counted(self: ResultStore, state: int, level: int, rows: int, start: int = 0) -> Any:
        got = rows_of(self, state, level, rows, start)
        reads.append(got.shape[0])
        return got

    monkeypatch.setattr(ResultStore, "read_residual_rows", counted)
    monkeypatch.setattr(epl_level, "STEP_ELEMENTS", n)  # the largest block: one row a step
    monkeypatch.setattr(epl_level, "READ_ELEMENTS", 1 << 40)
    whole = epl_level.epl_blocks(ResultStore.at(url), plan, g, blocks, knobs)
    at_once = list(reads)  # each block's replicates, and the lattices' samples
    reads.clear()
    monkeypatch.setattr(epl_level, "READ_ELEMENTS", 2 * n)  # the largest: two rows a range
    ranged = epl_level.epl_blocks(ResultStore.at(url), plan, g, blocks, knobs)
    assert_identical(_plain(ranged), _plain(whole))
    # the largest block read in ranges that cover its replicates once, every residual counted
    # (power: a range counted into fresh histograms, the earlier rows dropped, or a block's bias
    # sums of its last range alone, would not be the block read whole)
    assert len(reads) >= len(at_once) + plan.replicates // 2 - 1
    assert sum(reads) == sum(at_once)
    counted_n = sum(h.n for p in ranged for h in p["hists"] if h is not None)
    items = sum(ResultStore.at(url).read_query_index(b.state, b.level).size for b in blocks)
    assert counted_n == pytest.approx(items * plan.replicates)
    if kind == "topdown":
        assert plan.strategy.topdown_bias and all("bias" in p for p in ranged)
        sums = np.sum([p["bias"][0] for p in ranged], axis=0)
        assert np.all(sums == np.round(sums))  # integer totals: exact in any order


def test_read_rows_are_whole_steps_within_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(epl_level, "STEP_ELEMENTS", 1000)
    monkeypatch.setattr(epl_level, "READ_ELEMENTS", 10_000)
    assert epl_level.read_rows(100) == 100  # ten steps of ten rows
    assert epl_level.read_rows(300) == 33  # steps of 3 rows: 11 of them (9,900 residuals)
    assert epl_level.read_rows(2_000) == 5  # a step is a row: 5 rows of 2,000
    assert epl_level.read_rows(50_000) == 1  # a row is more than the bound: one at a time
