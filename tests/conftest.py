"""Test configuration: Prefect isolated in a temporary home, set before Prefect is imported."""

from __future__ import annotations

import os
import tempfile

_PREFECT_HOME = tempfile.mkdtemp(prefix="dpaudit-prefect-home-")
os.environ["PREFECT_HOME"] = _PREFECT_HOME
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "120"
os.environ["PREFECT_LOGGING_LEVEL"] = "WARNING"
os.environ.pop("PREFECT_API_URL", None)
# the accounting result cache of the session: never the user's own cache directory
os.environ["DPAUDIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="dpaudit-cache-")
