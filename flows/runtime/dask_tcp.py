"""Dask's TCP timeout of a run's clusters: raised for the ones it starts, checked on one it joins.

- :func:`apply_dask_defaults` — :data:`DASK_TCP_TIMEOUT` in this process and, through the
  environment, in the worker processes it starts (unless the user set a timeout).
- :func:`tcp_timeout_warning` — one line if a scheduler a run joins, or any of its workers, keeps
  Dask's 30 s default, naming the fix (:data:`TCP_TIMEOUT_FIX`).
"""

from __future__ import annotations

import os
from typing import Any

from flows.runtime.reachability import CONNECT_TIMEOUT_S, redact_url

#: Dask's ``distributed.comm.timeouts.tcp`` for the clusters a run starts (a cluster it joins keeps
#: its own and is checked: :func:`tcp_timeout_warning`). Dask's 30 s is also the kernel's
#: TCP_USER_TIMEOUT on its connections: a worker whose task holds the GIL for over 30 s (an exact
#: accounting on a busy machine) while the scheduler has data queued for it has its connection
#: aborted, is dropped by the scheduler and shuts down; with no worker left, the run would wait for
#: ``cluster.timeout_s``. A dead local process still closes its connections at once.
DASK_TCP_TIMEOUT = "600s"
_DASK_DEFAULT_TCP = "30s"


def apply_dask_defaults() -> None:
    """Raise Dask's TCP timeout to :data:`DASK_TCP_TIMEOUT` unless the user set one (config file or
    ``DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP``): in this process, and through the environment in the
    worker processes it starts."""
    import dask

    if "DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP" in os.environ:
        return
    if (
        str(dask.config.get("distributed.comm.timeouts.tcp", _DASK_DEFAULT_TCP))
        != _DASK_DEFAULT_TCP
    ):
        return
    os.environ["DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP"] = DASK_TCP_TIMEOUT
    dask.config.set({"distributed.comm.timeouts.tcp": DASK_TCP_TIMEOUT})


#: what a scheduler or worker started separately needs to keep its connections under load
TCP_TIMEOUT_FIX = f"DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP={DASK_TCP_TIMEOUT}"


def _seconds(value: Any) -> float | None:
    from dask.utils import parse_timedelta

    try:
        return float(parse_timedelta(value, default="seconds"))
    except (TypeError, ValueError):
        return None


def tcp_timeout_warning(address: str, timeout: float = CONNECT_TIMEOUT_S) -> str | None:
    """One line if the scheduler at ``address`` or any of its workers keeps Dask's 30 s TCP
    timeout (``distributed.comm.timeouts.tcp``), naming the fix; None if none does (or if the
    cluster cannot be asked: the run reports that itself).

    A cluster a run joins was started with its own config: :func:`apply_dask_defaults` reaches only
    the processes a run starts, so a separately started ``dask worker`` at 30 s is dropped by a
    busy scheduler as in :data:`DASK_TCP_TIMEOUT`'s note.
    """

    def tcp() -> Any:  # run in the scheduler and each worker (pickled by value)
        import dask

        return dask.config.get("distributed.comm.timeouts.tcp", None)

    try:
        from distributed import Client

        with Client(address, timeout=timeout, set_as_default=False) as client:
            scheduler = client.run_on_scheduler(tcp)
            workers = client.run(tcp, on_error="return")
    except Exception:
        return None
    limit = _seconds(_DASK_DEFAULT_TCP) or 30.0

    def short(value: Any) -> bool:
        s = _seconds(value) if value is not None else limit
        return s is not None and s <= limit

    low = [w for w, v in workers.items() if not isinstance(v, BaseException) and short(v)]
    where = redact_url(address)
    n = f"({len(low)} of {len(workers)})"
    if short(scheduler):
        who = f"the Dask scheduler at {where} " + (f"and its workers {n} keep" if low else "keeps")
    elif low:
        who = f"the workers {n} of the Dask scheduler at {where} keep"
    else:
        return None
    return (
        f"{who} Dask's {limit:g} s TCP "
        "timeout (distributed.comm.timeouts.tcp): a worker whose task holds the GIL longer on a "
        f"busy machine is dropped; start the scheduler and workers with {TCP_TIMEOUT_FIX}"
    )
