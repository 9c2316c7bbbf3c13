"""What the process of a `dpaudit run` imports before its flow starts: not the modules only other
processes or rare paths need (each is seconds of a small run's start, on cores the embedded API
and the workers' forkserver are starting on): Prefect's server (the API's own process),
scipy.stats and scipy.signal (scipy's KDE cross-check, the ADPC pmf of P > 1 runs)."""

from __future__ import annotations

import json
import subprocess
import sys

NOT_IMPORTED = ("prefect.server.api.server", "scipy.stats", "scipy.signal")

_PROBE = """
import json, sys
from flows.cli.app import app  # the command line
from flows.cli.run import run_audit
from flows.spec import load_spec
from flows.audit.flow import audit_flow, run_id_for  # the flow the run process drives
from flows.spec.plan import make_plan
from flows.runtime.cluster import cluster_runner, starting_prefect_api

make_plan(load_spec())  # the shipped spec
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("prefect", "scipy"))))
"""


def test_the_run_process_does_not_import_what_only_others_need() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=300, check=True
    )
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert "prefect.flows" in loaded and "scipy.fft" in loaded  # the probe did import the flow
    assert not [m for m in NOT_IMPORTED if m in loaded], [m for m in NOT_IMPORTED if m in loaded]
