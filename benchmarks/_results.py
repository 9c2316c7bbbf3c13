"""What the studies share: their CSV tables, the closing line of a run and the best-of timer."""

from __future__ import annotations

import csv
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def write_rows(out: Path, rows: list[dict[str, Any]]) -> str:
    """``rows`` as a CSV table at ``out`` (the first row's keys the header, floats to six significant
    digits), its folder made if missing; returns ``"<n> rows -> <out>"`` for the run's last line."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        for row in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
    return f"{len(rows)} rows -> {out}"


def since(t0: float) -> str:
    """Seconds since ``t0`` (a ``time.perf_counter()`` reading), as ``"<s> s"``."""
    return f"{time.perf_counter() - t0:.0f} s"


def where(t0: float) -> str:
    """:func:`since` with the machine, the Python and the numpy the run had."""
    return (
        f"{since(t0)} on {platform.machine()}, {platform.python_version()}, numpy {np.__version__}"
    )


def best_of(fn: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    """Smallest wall time over ``repeat`` runs (seconds) and the last result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result
