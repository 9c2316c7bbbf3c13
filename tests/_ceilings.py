"""Ceilings on what the tests wait for: generous, so that a loaded machine only waits longer.

A test waits for a thing (a process's end, a file, a port, a state), never for a guess of how
long it takes; these bound the wait only so that a hung test ends. Idle, a Prefect API starts in
10-15 s and a test's ``dpaudit`` process ends in under a minute."""

#: a Prefect API answering (the harness's, a run's embedded one, a served one)
PREFECT_START_CEILING_S = 600
#: a process a test starts and waits for (it may start a Prefect API and a Dask cluster)
PROCESS_CEILING_S = 2 * PREFECT_START_CEILING_S
