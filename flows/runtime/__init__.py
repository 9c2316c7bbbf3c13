"""Where and how a flow runs: the Prefect API and the Dask cluster (``cluster.py``), Dask's TCP
timeout, reachability checks, the lifeline of child servers, the worker watch, the run directory
and its log, and progress events."""
