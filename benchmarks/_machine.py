"""The machine a benchmark ran on, printed with its figures."""

from __future__ import annotations

import os
import platform

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
