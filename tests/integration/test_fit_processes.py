"""``cluster.fit_processes`` on real clusters: a run joining a cluster of daemonic workers (a
``dask worker`` with its nanny, Dask's default) is refused before any work, naming the fix; a
cluster of non-daemonic workers runs a production state's fits in two processes beside each task
and stores what one process stores."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from flows.runtime.cluster import ClusterConfigError, cluster_runner
from flows.runtime.part_pool import daemonic_workers_refusal
from flows.spec import parse_spec
from flows.spec.cluster import ClusterSection
from flows.spec.sources import load_spine
from tests.integration._stores import assert_same_arrays, undisturbed_audit
from tests.integration.test_production_flow import SEED, state_spec

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def non_daemonic() -> Iterator[str]:
    """A local cluster of one one-thread worker that may start processes."""
    import dask
    from distributed import LocalCluster

    with dask.config.set({"distributed.worker.daemon": False}):
        with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as c:
            yield c.scheduler_address


def test_joining_daemonic_workers_is_refused_before_any_work(dask_address: str) -> None:
    got = daemonic_workers_refusal(dask_address, 2, 10.0)
    assert got is not None and "2 of the 2 workers" in got and "--no-nanny" in got
    assert daemonic_workers_refusal(dask_address, 1, 10.0) is None  # one process: no pool
    section = ClusterSection(scheduler=dask_address, fit_processes=2)
    with pytest.raises(ClusterConfigError, match=r"fit_processes = 2 .*daemon"):
        with cluster_runner(section):
            pass


def test_a_state_with_two_fit_processes_stores_what_one_stores(
    prefect_harness: None, non_daemonic: str, tmp_path: Path
) -> None:
    assert daemonic_workers_refusal(non_daemonic, 2, 10.0) is None
    spine = load_spine(SEED, "US")
    label = f"ST{int(np.argmin(spine.populations()['State'])) + 1:02d}"
    urls = {}
    for n in (2, 1):
        spec = parse_spec(state_spec(label, 1, cluster={"fit_processes": n}))
        urls[n] = str(tmp_path / f"fit{n}.zarr")
        undisturbed_audit(spec, urls[n], non_daemonic)
    assert_same_arrays(urls[2], urls[1], at_least=14)
