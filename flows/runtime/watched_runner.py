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
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._given_cluster = kwargs.get("cluster")

    def duplicate(self) -> WatchedDaskTaskRunner:
        """The runner of each flow run: Prefect's copy drops a cluster given as an object (it would
        start a default one); this copy keeps it (started and closed by its owner, not here)."""
        if self._given_cluster is None:
            return super().duplicate()
        return type(self)(cluster=self._given_cluster, client_kwargs=self.client_kwargs)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without a live cluster (the flow, and with it its runner, goes to the workers
        with each task; they never run tasks through it)."""
        state = self.__dict__.copy()
        if state.get("_given_cluster") is not None:
            state.update(_given_cluster=None, _cluster=None, _connect_to=None)
        return state

    @property
    def client(self) -> Any:
        client = super().client
        track_client(client)
        return client
