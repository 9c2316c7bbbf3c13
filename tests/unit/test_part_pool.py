"""A production state's fits in processes beside its task (``cluster.fit_processes``,
``flows.runtime.part_pool``): the same release as in the task's own process, the parts' CPU
counted in the state's cost, and a daemonic process (a Dask worker's default) refused with the
fix named."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

from auditlib.exceptions import InvalidParameterError
from flows.audit.production import production_runs
from flows.audit.production_progress import Cost
from flows.runtime.part_pool import PartPool
from flows.spec import parse_spec
from flows.spec.plan import make_plan

LABEL = "ST13"  # the smallest state of the seed-7 spine


def _plan(processes: int):  # type: ignore[no-untyped-def]
    return make_plan(
        parse_spec(
            {
                "audit": {"allocation": "pl94_2021_production", "replicates": 1, "seed": 11},
                "population": {
                    "kind": "spine",
                    "seed": 7,
                    "spine_states": [LABEL],
                    "attributes": "pl94_production",
                },
                "release": {"kind": "topdown"},
                "cluster": {"fit_processes": processes},
            }
        )
    )


def _state_block(plan):  # type: ignore[no-untyped-def]
    return next(b for b in plan.blocks if plan.geolevels[b.level] == "State")


def test_a_state_with_its_fits_in_two_processes_is_released_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    one = _plan(1)
    assert one.production is not None and one.production.fit_processes == 1
    here, _ = production_runs(one, _state_block(one))
    used = []
    mapped = PartPool.map

    def counted(self, fn, items):  # type: ignore[no-untyped-def]
        used.append(self.processes)
        yield from mapped(self, fn, items)

    monkeypatch.setattr(PartPool, "map", counted)
    two = _plan(2)
    there, _ = production_runs(two, _state_block(two))
    assert used and set(used) == {2}  # the fits' parts went to the two processes
    for x, y in zip(here[0], there[0], strict=True):
        np.testing.assert_array_equal(x.indptr, y.indptr)
        np.testing.assert_array_equal(x.cells, y.cells)
        np.testing.assert_array_equal(x.counts, y.counts)


def _busy(n: int) -> float:
    """CPU seconds of a loop of ``n`` steps, measured where it runs."""
    import time

    t0, total = time.process_time(), 0
    for i in range(n):
        total += i
    return time.process_time() - t0


def test_the_pools_cpu_is_counted_in_the_states_cost() -> None:
    cost = Cost()
    with PartPool(2) as pool:
        cost.pool = pool
        spent = list(pool.map(_busy, [2_000_000] * 4))  # in order, one result per item
    assert len(spent) == 4 and sum(spent) > 0.05
    assert sum(spent) <= pool.cpu < sum(spent) + 0.05  # each part's CPU, where it ran
    assert pool.peak_rss > 10e6  # a process that has imported the fit
    assert cost.now()["cpu_s"] >= pool.cpu  # this process idled: without the pool's, ≈ 0


def test_a_daemonic_process_is_refused_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(multiprocessing.current_process(), "daemon", True, raising=False)
    with pytest.raises(InvalidParameterError, match=r"fit_processes = 2.*--no-nanny.*daemon"):
        PartPool(2)
