"""A flow run on a fresh local Dask cluster of two worker processes, checked to share its US spine
(``flows.audit.spine_share``): generated once, in the flow's process, fetched by the workers under one
published name, and unpublished when the flow ends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def generated() -> int:
    """The spines this process has generated (run on each worker too)."""
    from flows.spec.sources import spines_generated

    return spines_generated()


def fetched() -> list[str]:
    """The published spines this process has fetched."""
    from flows.audit import spine_share

    return sorted(spine_share._fetched)


def run_sharing_the_spine(run: Callable[[str], Any], published: str) -> Any:
    """``run(address)`` on a fresh cluster of two worker processes; the one spine generation of
    the run is this process's, no worker generates one, every worker that fetched one fetched the
    same, its name starting ``published``, and nothing is left published. ``run``'s result."""
    from distributed import Client, LocalCluster

    before = generated()
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        result = run(cluster.scheduler_address)
        on_workers = client.run(generated)
        fetched_by = client.run(fetched)
        assert client.list_datasets() == ()  # unpublished when the flow ended
    assert generated() - before == 1  # the flow's plan: the one generation of the run
    assert set(on_workers.values()) == {0}, on_workers  # no worker generated it
    names = {n for ns in fetched_by.values() for n in ns}
    assert len(names) == 1 and names.pop().startswith(published), fetched_by
    return result
