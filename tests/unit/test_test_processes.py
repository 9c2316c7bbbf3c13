"""The test processes run one BLAS and OpenMP thread, as Dask's nanny gives its workers
(tests/conftest.py): two pytest processes share the 2 cores of the tiers' machine."""

from __future__ import annotations

import os
import subprocess
import sys

from threadpoolctl import threadpool_info


def test_this_process_and_its_children_run_one_blas_thread() -> None:
    pools = [(p["internal_api"], p["num_threads"]) for p in threadpool_info()]
    assert pools and all(n == 1 for _, n in pools), pools
    # a process a test starts (a `dpaudit run`, a scheduler) inherits the setting
    code = (
        "import numpy, threadpoolctl\n"
        "print(max(p['num_threads'] for p in threadpoolctl.threadpool_info()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
