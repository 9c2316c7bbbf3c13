"""prefect_dask's ``DaskTaskRunner`` whose Dask client, once started, the worker watch can find
(flows/runtime/worker_watch.py): Prefect keeps a runner's client out of Dask's registry of clients.

Imports Prefect: import it only where the runtime's settings are in place (flows/runtime/cluster.py). A
module-level class, so that what Prefect sends to the workers refers to it by name.
"""

from __future__ import annotations

from typing import Any

from prefect_dask import DaskTaskRunner

from flows.runtime.worker_watch import track_client


class WatchedDaskTaskRunner(DaskTaskRunner):
    @property
    def client(self) -> Any:
        client = super().client
        track_client(client)
        return client
