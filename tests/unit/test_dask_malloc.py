"""The worker processes a run starts allocate with glibc's trim and mmap thresholds raised
(``flows.runtime.dask_malloc``): set unless the user set either, and seen by a real worker, whose
temporary arrays then stop costing a page fault per page (Dask's own setting, the control, does)."""

from __future__ import annotations

import os
import sys

import dask
import numpy as np
import pytest
from distributed import Client, LocalCluster

from flows.runtime.cluster import forked_workers
from flows.runtime.dask_malloc import WORKER_MALLOC_THRESHOLD, apply_malloc_defaults

KEY = "distributed.nanny.pre-spawn-environ"
DASK_DEFAULT = {
    "MALLOC_TRIM_THRESHOLD_": 65536,
    "OMP_NUM_THREADS": 1,
    "MKL_NUM_THREADS": 1,
    "OPENBLAS_NUM_THREADS": 1,
}


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No threshold in this process's environment; as it was, after the test (a nanny adds its
    own)."""
    for var in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_"):
        monkeypatch.delenv(var, raising=False)


def test_dasks_default_gets_both_thresholds_and_keeps_the_rest() -> None:
    with dask.config.set({KEY: dict(DASK_DEFAULT)}):
        apply_malloc_defaults()
        env = dask.config.get(KEY)
    assert env["MALLOC_TRIM_THRESHOLD_"] == env["MALLOC_MMAP_THRESHOLD_"] == 32 * 2**20
    assert {k: v for k, v in env.items() if not k.startswith("MALLOC_")} == {
        "OMP_NUM_THREADS": 1, "MKL_NUM_THREADS": 1, "OPENBLAS_NUM_THREADS": 1,
    }  # fmt: skip


@pytest.mark.parametrize(
    "users",
    [
        {"MALLOC_TRIM_THRESHOLD_": 1 << 20},
        {"MALLOC_TRIM_THRESHOLD_": 65536, "MALLOC_MMAP_THRESHOLD_": 0},
    ],
    ids=["trim", "mmap"],
)
def test_a_users_own_threshold_is_kept(users: dict[str, int]) -> None:
    with dask.config.set({KEY: dict(users)}):
        apply_malloc_defaults()
        assert dask.config.get(KEY) == users
    assert "MALLOC_MMAP_THRESHOLD_" not in os.environ


def test_a_threshold_in_the_environment_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """The nanny prefers the process's environment to its config: a value there is the user's."""
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "1048576")
    with dask.config.set({KEY: dict(DASK_DEFAULT)}):
        apply_malloc_defaults()
        assert dask.config.get(KEY) == DASK_DEFAULT
    assert "MALLOC_MMAP_THRESHOLD_" not in os.environ


def _churn() -> tuple[str | None, str | None, int]:
    """Minor page faults of 2,000 temporary arrays of 0.25-4 MB in this worker's task thread."""
    import resource

    rng = np.random.default_rng(0)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for n in rng.integers(30_000, 500_000, 2000):
        x = np.ones(n)
        y = x * 2
        del x, y
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    return (
        os.environ.get("MALLOC_TRIM_THRESHOLD_"),
        os.environ.get("MALLOC_MMAP_THRESHOLD_"),
        faults,
    )


def _faults() -> tuple[str | None, str | None, int]:
    with (
        forked_workers(),
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
        ) as cluster,
        Client(cluster) as client,
    ):  # fmt: skip
        return client.submit(_churn, pure=False).result()


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's malloc: Linux here")
def test_a_worker_a_run_starts_reuses_its_temporaries() -> None:
    with dask.config.set({KEY: dict(DASK_DEFAULT)}):
        trim, mmap, dasks = _faults()  # the control: Dask's own setting
        assert (trim, mmap) == ("65536", None)
        # the control's nanny left its threshold in this process's environment: still Dask's
        apply_malloc_defaults()
        trim, mmap, ours = _faults()
    assert trim == mmap == str(WORKER_MALLOC_THRESHOLD)
    # Dask's setting: about a fault per page of every array (2,000 arrays of 500 pages on average,
    # 2 million faults); raised: the pages are reused (about 2,000 faults here)
    assert dasks > 500_000, dasks
    assert ours < dasks / 20, (ours, dasks)
