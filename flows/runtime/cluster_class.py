"""A Dask cluster class's keyword arguments: loopback defaults for what the spec's
``cluster.kwargs`` leave unset, and one line for a class that did not start with them."""

from __future__ import annotations

import re
from typing import Any

#: servers dpaudit starts listen here unless the spec says otherwise
LOOPBACK = "127.0.0.1"


def cluster_class_kwargs(cls: type, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``cluster.kwargs`` for cluster class ``cls`` with loopback defaults for what they leave unset.

    - A class taking ``scheduler_options`` (dask_jobqueue's ``SLURMCluster``, ``PBSCluster``, ...):
      the dashboard on ``127.0.0.1`` and a free port, added to the scheduler options the class would
      use (``kwargs['scheduler_options']`` or its ``jobqueue.<name>.scheduler-options`` config).
      The scheduler itself keeps the class's choice (the interface it shares with the workers):
      workers in batch jobs on other nodes must reach it.
    - A class taking ``host`` and/or ``dashboard_address`` (``distributed.LocalCluster``): the
      scheduler on ``127.0.0.1`` unless ``host``, ``ip``, ``interface`` or ``protocol`` is given
      (or ``processes = false``: in-process comms), the
      dashboard on ``127.0.0.1`` and a free port unless ``dashboard_address`` is given.
    - Any other class gets its kwargs unchanged (only named parameters are filled in).
    """
    import inspect

    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return dict(kwargs)
    out = dict(kwargs)
    dashboard = f"{LOOPBACK}:0"
    if "scheduler_options" in params:
        options = kwargs.get("scheduler_options")
        if options is None:
            options = _jobqueue_scheduler_options(cls, kwargs)
        if isinstance(options, dict) and "dashboard_address" not in options:
            out["scheduler_options"] = {**options, "dashboard_address": dashboard}
        return out
    in_process = kwargs.get("processes") is False  # LocalCluster: in-process comms, no host
    if "host" in params and not ({"host", "ip", "interface", "protocol"} & kwargs.keys()):
        if not in_process:
            out["host"] = LOOPBACK
    if "dashboard_address" in params and "dashboard_address" not in kwargs:
        out["dashboard_address"] = dashboard
    return out


def _jobqueue_scheduler_options(cls: type, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The scheduler options a dask_jobqueue class reads from Dask's config when given none."""
    import dask

    name = kwargs.get("config_name") or getattr(getattr(cls, "job_cls", None), "config_name", None)
    if not name:
        return {}
    return dict(dask.config.get(f"jobqueue.{name}.scheduler-options", {}) or {})


def class_failure(path: str, kwargs: dict[str, Any], exc: BaseException) -> str:
    """One line for a cluster class that did not start: the kwarg it did not take, if that is it."""
    chain: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__cause__ or e.__context__
    for e in chain:
        m = re.search(r"unexpected keyword argument '([^']+)'", str(e))
        if isinstance(e, TypeError) and m:
            return (
                f"cluster.class = {path!r} did not start: it (or a worker or scheduler it starts) "
                f"takes no argument {m.group(1)!r}; remove or rename it in cluster.kwargs "
                "(see that class's documentation)"
            )
    root = chain[-1]
    text = f"{type(root).__name__}: {root}".splitlines()[0][:300]
    return (
        f"cluster.class = {path!r} did not start with cluster.kwargs = {kwargs!r} ({text}); "
        "fix cluster.kwargs (see that class's documentation)"
    )
