"""How the worker processes a run starts allocate memory: glibc's trim and mmap thresholds.

Dask's nanny starts each worker with ``MALLOC_TRIM_THRESHOLD_=65536``
(``distributed.nanny.pre-spawn-environ``), so that freed memory goes back to the system at once and
a worker's resident memory follows what it holds. Setting that threshold also fixes glibc's mmap
threshold at 128 KiB, and a worker's task threads allocate from arenas that are trimmed at 64 KiB:
every temporary array of more than a few pages is mapped, zeroed by the kernel page by page and
unmapped again. The sparse TopDown fit makes thousands of such temporaries a second: one DHC state
of 246,980 people (ST13 of the seed-7 spine, seven levels, tolerance 0.05) took 116.1 CPU-s, 52.6 of
them in the kernel, with the nanny's setting, against 56.3 and 2.3 with the one below (56.2 with
glibc's own), at a peak of 796 MB instead of 652 (in a thread, one BLAS thread, median of 2
alternated runs: ``benchmarks/bench_worker_malloc.py``, ``benchmarks/results/worker_malloc.txt``).

:func:`apply_malloc_defaults` raises both thresholds to :data:`WORKER_MALLOC_THRESHOLD` for the
worker processes a run starts, unless the user set either of them to another value than Dask's
(Dask's config, from a config file or ``dask.config.set``, or the ``MALLOC_*`` variables
themselves, which the nanny prefers to its config). A worker then keeps at most that much free
memory at the top of each arena, and arrays larger than it are still mapped and returned at once.

A cluster a run joins keeps the settings it was started with: its workers take these with
``MALLOC_TRIM_THRESHOLD_=33554432`` and ``MALLOC_MMAP_THRESHOLD_=33554432``
(:data:`WORKER_MALLOC_VARS`) in the environment of ``dask worker``, as every ``deploy/`` recipe
starts them. The nanny takes each ``pre-spawn-environ`` value from its own environment when set
there, and a worker process inherits the nanny's environment (the mmap threshold, not in Dask's
config, that way only). The
``DASK_DISTRIBUTED__NANNY__PRE_SPAWN_ENVIRON__MALLOC_..._=...`` form does not work: Dask lowercases
the keys of its ``DASK_*`` variables, so the nanny exports ``malloc_trim_threshold_``, which glibc
ignores, beside Dask's own ``MALLOC_TRIM_THRESHOLD_=65536``.
"""

from __future__ import annotations

import os

#: glibc's trim and mmap thresholds for the workers a run starts, in bytes: 32 MiB, the largest mmap
#: threshold glibc's own adaptive setting reaches on 64-bit systems
WORKER_MALLOC_THRESHOLD = 32 * 1024 * 1024
#: Dask's own trim threshold (``distributed.nanny.pre-spawn-environ``)
_DASK_DEFAULT_TRIM = 65536
_KEY = "distributed.nanny.pre-spawn-environ"
_TRIM, _MMAP = "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_"
#: what a ``dask worker`` started separately needs in its environment for the thresholds of the
#: workers a run starts
WORKER_MALLOC_VARS = f"{_TRIM}={WORKER_MALLOC_THRESHOLD} {_MMAP}={WORKER_MALLOC_THRESHOLD}"


def apply_malloc_defaults() -> None:
    """Both thresholds at :data:`WORKER_MALLOC_THRESHOLD` for the worker processes this process
    starts, unless the user set either (module docstring): in Dask's config and in this process's
    environment, which the nanny's takes precedence from (and updates with its own)."""
    import dask

    env = dict(dask.config.get(_KEY, None) or {})
    if _MMAP in env or _MMAP in os.environ:
        return
    for trim in (env.get(_TRIM), os.environ.get(_TRIM)):
        if trim is not None and str(trim) != str(_DASK_DEFAULT_TRIM):
            return
    env[_TRIM] = env[_MMAP] = WORKER_MALLOC_THRESHOLD
    dask.config.set({_KEY: env})
    os.environ[_TRIM] = os.environ[_MMAP] = str(WORKER_MALLOC_THRESHOLD)
