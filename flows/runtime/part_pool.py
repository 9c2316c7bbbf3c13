"""Processes beside a production TopDown state's task that solve its fits' parts
(``cluster.fit_processes``; :mod:`auditlib.simulate.sparse_parts`): the largest state's replicate
is hours of one core, so on a worker with cores to spare it can use more than one. A part's
solution depends on its own data alone: the release is the same with any number of processes.

The pool counts what its processes spend on the parts (each part's CPU seconds, measured where it
runs; their start, a fork of a server that has imported the fit, is not counted), so the state's
cost (``flows.audit.production_progress.Cost``) includes it, and their peak memory (the largest).

A Dask worker's processes are daemonic unless the cluster is told otherwise
(``distributed.worker.daemon``): the local cluster is started non-daemonic when ``fit_processes``
> 1; workers started elsewhere must be (``dask worker --no-nanny``, or that setting), else the
task fails with a message naming the fix."""

from __future__ import annotations

import multiprocessing
import resource
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from auditlib.exceptions import InvalidParameterError


@dataclass(frozen=True)
class _Timed:
    """``fn``, the CPU seconds its call took in the process that ran it, and that process's peak
    RSS so far (bytes)."""

    fn: Callable[[Any], Any]

    def __call__(self, item: Any) -> tuple[Any, float, int]:
        t0 = time.process_time()
        out = self.fn(item)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return out, time.process_time() - t0, peak


def _refusal(processes: int, where: str) -> str:
    return (
        f"cluster.fit_processes = {processes} needs worker processes that may start processes, "
        f"and {where}: start workers with `dask worker --no-nanny` or with the Dask setting "
        "distributed.worker.daemon = false, or set cluster.fit_processes = 1"
    )


def daemonic_workers_refusal(address: str, processes: int, timeout: float) -> str | None:
    """The refusal (:func:`_refusal`) if any worker of the scheduler at ``address`` is daemonic
    (it could not start the pool), else None (also when it cannot be asked: the run reports
    that itself). Checked when a run joins a cluster, before any work."""
    if processes <= 1:
        return None

    def daemonic() -> bool:  # run in each worker (pickled by value)
        import multiprocessing

        return bool(multiprocessing.current_process().daemon)

    try:
        from distributed import Client

        with Client(address, timeout=timeout, set_as_default=False) as client:
            got = client.run(daemonic, on_error="return")
    except Exception:
        return None
    bad = [w for w, v in got.items() if v is True]
    if not bad:
        return None
    return _refusal(processes, f"{len(bad)} of the {len(got)} workers at {address} are daemonic")


class PartPool:
    """``processes`` processes (forkserver, the fit's modules preloaded) with ``map`` for
    :func:`~auditlib.simulate.sparse_topdown.sparse_topdown`'s ``pool``; ``cpu`` the CPU seconds
    of the parts solved so far, ``peak_rss`` the largest peak RSS of its processes (bytes, as of
    their last part)."""

    def __init__(self, processes: int) -> None:
        if multiprocessing.current_process().daemon:
            raise InvalidParameterError(_refusal(processes, "this Dask worker is daemonic"))
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["auditlib.simulate.sparse_fit"])
        self._pool = ProcessPoolExecutor(processes, mp_context=ctx)
        self.processes = processes
        self.cpu = 0.0
        self.peak_rss = 0

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
        """Every item submitted now; the results in order as they are taken."""
        return self._results(self._pool.map(_Timed(fn), items))

    def _results(self, timed: Iterator[tuple[Any, float, int]]) -> Iterator[Any]:
        for out, cpu, peak in timed:
            self.cpu += cpu
            self.peak_rss = max(self.peak_rss, peak)
            yield out

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def __enter__(self) -> PartPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
