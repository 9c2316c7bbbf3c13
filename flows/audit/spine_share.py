"""The US spine of a run generated once and shared with every Dask worker.

The flow's process generates the spine (``flows.spec.sources.load_spine``, for the plan); the flow
scatters it to every worker of its Dask cluster (``broadcast``) and publishes it under a name keyed
by the spine's seed, region and content digest, carried to the tasks in ``plan.spine.shared``. A
worker reads the published copy it already holds (a worker that joined later fetches it from a
peer) instead of generating the spine again; without a Dask task runner, or if the published copy
cannot be read, the spine is generated as before (the same arrays: it is keyed by its seed). The
name is unpublished when the flow ends.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from flows.spec.sources import load_spine

if TYPE_CHECKING:
    from flows.spec.audit_plan import AuditPlan, SpineParams

PREFIX = "dpaudit-spine"

#: spines this process read from the cluster, by published name
_fetched: dict[str, Any] = {}


def digest(spine: Any) -> str:
    """sha256 (hex, 16 digits) of a spine's state names, parent arrays, the DHC's Prim links (where
    drawn) and block populations."""
    h = hashlib.sha256("\x00".join(spine.state_names).encode())
    for level in sorted(spine.parents):
        h.update(level.encode())
        h.update(np.ascontiguousarray(spine.parents[level]).tobytes())
    for level in sorted(spine.prim_parents):
        h.update(f"prims:{level}".encode())
        h.update(np.ascontiguousarray(spine.prim_parents[level]).tobytes())
    h.update(np.ascontiguousarray(spine.block_population).tobytes())
    return h.hexdigest()[:16]


def _dask_client() -> Any:
    """The Dask client of the running flow's task runner; ``None`` without one."""
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    runner = getattr(ctx, "task_runner", None)
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError:  # pragma: no cover - a dependency
        return None
    return runner.client if isinstance(runner, DaskTaskRunner) else None


@contextmanager
def shared(plan: AuditPlan) -> Iterator[AuditPlan]:
    """``plan`` with its spine published on the flow's Dask cluster (``plan.spine.shared``) while
    the block is running; ``plan`` unchanged if it has no spine or the flow no Dask runner."""
    client = _dask_client() if plan.strategy.runs_on_spine else None
    params = plan.spine
    if params is None or client is None:
        yield plan
        return
    spine = load_spine(params.seed, params.region)  # the plan's: generated already
    name = f"{PREFIX}-{params.region}-{params.seed}-{digest(spine)}"
    future = client.scatter(spine, broadcast=True, hash=False)
    client.publish_dataset(future, name=name, override=True)
    try:
        yield replace(plan, spine=replace(params, shared=name))
    finally:
        try:
            client.unpublish_dataset(name)
        except Exception:  # the cluster is gone: so is the copy
            pass


def spine_of(params: SpineParams) -> Any:
    """The spine of a plan: the copy published on the cluster (``params.shared``) in a Dask worker,
    else (or if it cannot be read) ``load_spine``."""
    if params.shared:
        spine = _fetch(params.shared)
        if spine is not None:
            return spine
    return load_spine(params.seed, params.region)


def _fetch(name: str) -> Any:
    if name in _fetched:
        return _fetched[name]
    try:
        from distributed import get_client, get_worker

        get_worker()  # raises ValueError outside a worker
        future = get_client().get_dataset(name, default=None)
        spine = None if future is None else future.result()
    except Exception:  # not in a worker, or the copy is gone: generate it
        return None
    if spine is not None:
        _fetched.clear()  # one run's spine at a time
        _fetched[name] = spine
    return spine
