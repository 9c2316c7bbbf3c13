"""Tumult Analytics run from the host (``examples/clients.py --mechanism tumult-count``): its own
environment (``.venv-tumult``, made from examples/tumult-requirements.txt when missing) and
examples/tumult_client.py run by that environment's interpreter on a table of true counts."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
TUMULT_REQUIREMENTS = Path(__file__).resolve().with_name("tumult-requirements.txt")
TUMULT_CLIENT = Path(__file__).resolve().with_name("tumult_client.py")


def tumult_venv() -> Path:
    """Tumult's own environment: ``$DPAUDIT_TUMULT_VENV``, else ``.venv-tumult`` at the root."""
    return Path(os.environ.get("DPAUDIT_TUMULT_VENV") or ROOT / ".venv-tumult")


def tumult_python(venv: Path | None = None) -> Path:
    """The interpreter of Tumult's environment, made (``python -m venv``, then ``pip install -r
    examples/tumult-requirements.txt``) when it cannot import ``tmlt.analytics``; a
    ``RuntimeError`` names the step that failed."""
    venv = tumult_venv() if venv is None else venv
    venv.parent.mkdir(parents=True, exist_ok=True)
    # one maker at a time: another process making it is waited for, then its result probed
    with open(venv.with_name(venv.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _made(venv)


def _made(venv: Path) -> Path:
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import tmlt.analytics"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print(f"making Tumult's environment {venv} (pip install -r {TUMULT_REQUIREMENTS.name})")
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(python), "-m", "pip", "install", "-q", "-r", str(TUMULT_REQUIREMENTS)],
        probe,
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(
                f"Tumult's environment {venv} could not be made: {' '.join(step)} exited "
                f"{done.returncode}: {(done.stderr or done.stdout)[-2000:]}"
            )
    return python


def run_tumult(
    truth: pd.DataFrame, runs: int, workdir: Path, budget: dict[str, float], count: str
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """``examples/tumult_client.py`` run by Tumult's interpreter on ``truth`` (written to
    ``workdir/truth.csv``): the table with the published runs ``dp0``, ``dp1``, … and what the
    client reports (Tumult's own noise description, its run time)."""
    python = tumult_python()
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    truth.to_csv(workdir / "truth.csv", index=False)
    out = workdir / "tumult.csv"
    (key, value), *_ = budget.items()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python))
    env["SPARK_LOCAL_IP"] = "127.0.0.1"  # Spark on the loopback address only
    cmd = [str(python), str(TUMULT_CLIENT), str(workdir / "truth.csv"), str(out)]
    cmd += [f"--{key}", repr(value), "--runs", str(runs), "--count", count]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr[-3000:]}")
    info = json.loads(out.with_suffix(".json").read_text())
    df = pd.read_csv(out, dtype={"state": str, "county": str})
    return df, info
