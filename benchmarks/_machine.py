"""The machine a benchmark ran on, printed with its figures, and the commit it ran."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import numpy as np
import scipy


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info() -> str:
    return (
        f"{platform.platform()} | {cpu_model()} | {os.cpu_count()} logical CPUs | Python "
        f"{platform.python_version()} | numpy {np.__version__} | scipy {scipy.__version__} | "
        f"load {os.getloadavg()[0]:.2f}"
    )


def commit() -> str:
    """The short hash of the checkout's HEAD, or ``"unknown"``."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
        )
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"
