"""Test configuration: Prefect isolated in a temporary home, set before Prefect is imported."""

from __future__ import annotations

import os
import tempfile

_PREFECT_HOME = tempfile.mkdtemp(prefix="dpaudit-prefect-home-")
os.environ["PREFECT_HOME"] = _PREFECT_HOME
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
from tests._ceilings import PREFECT_START_CEILING_S  # noqa: E402

os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = str(PREFECT_START_CEILING_S)
os.environ["PREFECT_LOGGING_LEVEL"] = "WARNING"
os.environ.pop("PREFECT_API_URL", None)
# the accounting result cache of the session: never the user's own cache directory
os.environ["DPAUDIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="dpaudit-cache-")

# one BLAS and OpenMP thread in every test process and every process a test starts, as Dask's nanny
# gives its workers: the tiers run two pytest processes on 2 cores, and OpenBLAS's spinning threads
# in one take the other's core (the seven-level DHC test of test_sparse_topdown_prims.py took 183 s
# beside a busy core with OpenBLAS's default threads, 53 s with one). The variables reach the
# pytest-xdist workers, started after this file is read; this process loaded numpy already (a
# plugin imports it), so its pools are limited at run time.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
from threadpoolctl import threadpool_limits  # noqa: E402

threadpool_limits(1)

import pytest  # noqa: E402  (after the environment above, like everything the tests import)

#: how to run each tier: the default run is the fast tier (addopts in pyproject.toml: -m "not slow")
TIERS = {
    "fast": ".venv/bin/python -m pytest -n 2",
    "slow": ".venv/bin/python -m pytest -m slow -n 3",
}

_COLLECTED = pytest.StashKey[dict[str, int]]()
_SELECTED = pytest.StashKey[dict[str, int]]()


def _counts(items: list[pytest.Item]) -> dict[str, int]:
    """The tests of each tier among ``items``: the slow tier is marked ``slow``."""
    slow = sum(1 for item in items if item.get_closest_marker("slow") is not None)
    return {"fast": len(items) - slow, "slow": slow}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Unit tests first (a broken build fails in seconds), then the integration tests, each in
    the order collected; each tier's tests counted before ``-m`` or ``-k`` deselects any."""
    items.sort(key=lambda item: 0 if "unit" in item.path.parts else 1)
    config.stash[_COLLECTED] = _counts(items)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    session.config.stash[_SELECTED] = _counts(session.items)


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """Each tier's tests in this run, and the command of a tier it left out."""
    collected, selected = config.stash.get(_COLLECTED, None), config.stash.get(_SELECTED, None)
    if collected is None or selected is None:  # pytest-xdist's controller collects nothing
        _tiers_from_reports(terminalreporter)
        return
    terminalreporter.write_sep("=", "test tiers")
    for tier, command in TIERS.items():
        total, ran = collected[tier], selected[tier]
        if ran == total:
            terminalreporter.write_line(f"{tier} tier: {ran} tests")
        elif ran == 0:
            terminalreporter.write_line(
                f"{tier} tier (not run): {total} tests; run it with: {command}"
            )
        else:
            terminalreporter.write_line(f"{tier} tier: {ran} of its {total} tests selected")


def _tiers_from_reports(terminalreporter: pytest.TerminalReporter) -> None:
    """Each tier's tests that ran, counted from the workers' reports (``pytest -n``)."""
    ran: dict[str, set[str]] = {"fast": set(), "slow": set()}
    for reports in terminalreporter.stats.values():
        for rep in reports:
            if isinstance(rep, pytest.TestReport):
                ran["slow" if "slow" in rep.keywords else "fast"].add(rep.nodeid)
    if not any(ran.values()):
        return
    terminalreporter.write_sep("=", "test tiers")
    for tier, ids in ran.items():
        if ids:
            terminalreporter.write_line(f"{tier} tier: {len(ids)} tests ran")
        else:
            terminalreporter.write_line(f"{tier} tier (not run): run it with: {TIERS[tier]}")
