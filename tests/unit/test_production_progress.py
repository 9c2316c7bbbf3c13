"""The resume points of a production TopDown state in a real (local Zarr) staging store
(``flows.audit.production_progress``): chunks saved and read back as they were, a batch left
half-written by a kill ignored, the cost recorded with them charged to the task that resumes
them (its own replicates only), and the finished tasks' costs summed per state."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from auditlib.simulate.sparse_progress import Batch, Chunk, kept_prefix
from flows.audit import production_progress as pp
from flows.runtime.cluster import ClusterConfigError, progress_every_s
from storage.result_store import ResultStore
from storage.schema import STORE_ATTR


@pytest.fixture
def store(tmp_path: Path) -> ResultStore:
    url = str(tmp_path / "s.zarr")
    zarr.open_group(url, mode="w", zarr_format=3, attributes={STORE_ATTR: True})  # dpaudit's
    st = ResultStore.at(url)
    pp.create(st)
    return st


def _batch(level: int, first: int, n: int, seed: int) -> Batch:
    rng = np.random.default_rng(seed)
    chunks = [
        Chunk(10 * k, 10 * k + 10, np.sort(rng.integers(0, 10**12, 5 + k)),
              rng.integers(1, 9, 5 + k), 3 * k, 100 + k)
        for k in range(first, first + n)
    ]  # fmt: skip
    return Batch(level, first, chunks, dict(np.random.default_rng(seed).bit_generator.state))


def test_chunks_read_back_as_saved(store: ResultStore) -> None:
    prog = pp.StoreProgress(store, 4, 1, every=0.0)
    a, b = _batch(2, 0, 2, 1), _batch(2, 2, 3, 2)
    prog.save([a, b])
    got, state = kept_prefix(prog.load(2), [(10 * k, 10 * k + 10) for k in range(5)])
    assert state == b.rng_state  # PCG64's 128-bit state survives as it was
    want = a.chunks + b.chunks
    assert len(got) == 5
    for g, w in zip(got, want, strict=True):
        assert (g.c0, g.c1, g.iterations, g.variables) == (w.c0, w.c1, w.iterations, w.variables)
        np.testing.assert_array_equal(g.keys, w.keys)
        np.testing.assert_array_equal(g.counts, w.counts)
    # another replicate, another level: nothing
    assert pp.StoreProgress(store, 4, 0).load(2) == [] and prog.load(3) == []


def test_a_half_written_batch_is_ignored(store: ResultStore) -> None:
    prog = pp.StoreProgress(store, 4, 0, every=0.0)
    prog.save([_batch(1, 0, 1, 1), _batch(1, 1, 1, 2)])
    zarr.open_group(f"{store.url}/{pp.PRODUCTION_PROGRESS}/4-0-L1-1", mode="a").attrs[
        "complete"
    ] = False  # the kill came while it was written
    got, _ = kept_prefix(prog.load(1), [(0, 10), (10, 20)])
    assert [(c.c0, c.c1) for c in got] == [(0, 10)]
    assert pp.kept_points(store) == 2


def test_a_finished_states_chunks_are_dropped_and_the_others_kept(store: ResultStore) -> None:
    for state in (3, 13, 31):
        pp.StoreProgress(store, state, 0, every=0.0).save([_batch(1, 0, 1, state)])
    pp.drop_state(store, 3)
    assert pp.kept_points(store) == 2
    assert pp.StoreProgress(store, 3, 0).load(1) == []
    assert len(pp.StoreProgress(store, 13, 0).load(1)) == 1  # not a prefix match: 13 is not 1-3


def test_the_kept_cost_is_charged_to_the_task_of_those_replicates(store: ResultStore) -> None:
    for rep, spent in ((0, 40.0), (0, 75.0), (1, 500.0)):
        pp.StoreProgress(store, 3, rep, every=0.0, cost=pp.Cost(prior_cpu=spent - 1e-9)).save(
            [_batch(2, int(spent), 1, rep)]
        )
    assert 75.0 <= pp.Cost().resume(store, 3, range(0, 1)).prior_cpu < 76.0  # the latest save
    assert pp.Cost().resume(store, 3, range(1, 2)).prior_cpu >= 500.0
    assert pp.Cost().resume(store, 3, range(0, 2)).prior_cpu >= 500.0
    assert pp.Cost().resume(store, 2, range(0, 2)).prior_cpu == 0.0  # another state


def test_finished_tasks_costs_are_summed_per_state(store: ResultStore) -> None:
    pp.save_cost(store, 1, 0, pp.Cost(prior_cpu=10.0, prior_wall=20.0))
    pp.save_cost(store, 1, 25, pp.Cost(prior_cpu=5.0, prior_wall=6.0))
    pp.save_cost(store, 2, 0, pp.Cost(prior_cpu=1.0))
    costs = pp.state_costs(store, 4)
    assert 15.0 <= costs["cpu_s"][1] < 16.0 and 26.0 <= costs["wall_s"][1] < 27.0
    assert 1.0 <= costs["cpu_s"][2] < 2.0
    assert np.isnan(costs["cpu_s"][[0, 3]]).all()  # none kept
    assert costs["peak_rss"][1] > 10e6  # this process's


def test_the_save_interval_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DPAUDIT_PROGRESS_EVERY_S", raising=False)
    assert progress_every_s() == 60.0
    monkeypatch.setenv("DPAUDIT_PROGRESS_EVERY_S", "0")
    assert progress_every_s() == 0.0
    assert pp.StoreProgress(ResultStore.at("unused.zarr"), 0, 0).every == 0.0  # read when made
    for bad in ("-1", "soon", "inf", "nan"):
        monkeypatch.setenv("DPAUDIT_PROGRESS_EVERY_S", bad)
        with pytest.raises(ClusterConfigError, match=f"DPAUDIT_PROGRESS_EVERY_S='{bad}'"):
            progress_every_s()
