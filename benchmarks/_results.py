"""What the studies share: their command line, CSV tables, the closing line of a run and the best-of
timer."""

from __future__ import annotations

import argparse
import csv
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).parent / "results"
"""The folder of the studies' tables."""


def study_parser(
    doc: str | None, *, reps: int, seed: int, table: str | None
) -> argparse.ArgumentParser:
    """A study's command line, described by the first line of ``doc``: ``--reps``, ``--seed`` and
    ``--out`` (its CSV table, by default ``table`` in :data:`RESULTS`), with these defaults."""
    ap = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    ap.add_argument("--reps", type=int, default=reps)
    ap.add_argument("--seed", type=int, default=seed)
    ap.add_argument("--out", type=Path, default=RESULTS / table if table else None)
    return ap


def run_study(
    run: Callable[[int, Path, int], None], doc: str | None, *, reps: int, seed: int, table: str
) -> None:
    """``run(reps, out, seed)`` as the study's command line (:func:`study_parser`) sets them."""
    a = study_parser(doc, reps=reps, seed=seed, table=table).parse_args()
    run(a.reps, a.out, a.seed)


def write_rows(out: Path, rows: list[dict[str, Any]]) -> str:
    """``rows`` as a CSV table at ``out`` (the first row's keys the header, floats to six significant
    digits), its folder made if missing; returns ``"<n> rows -> <out>"`` for the run's last line."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding="utf-8") as fh:
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


def read_check_rows(path: Path, script: str) -> list[dict[str, str]]:
    """The rows a capacity check's ``run`` wrote to ``path`` (exit with what to run if missing)."""
    if not path.exists():
        raise SystemExit(f"no {path.name}: run `{script} run` first")
    with path.open() as f:
        return list(csv.DictReader(f))


def check_main(
    doc: str,
    run: Callable[[argparse.Namespace], None],
    show: Callable[[argparse.Namespace], None],
    default_states: str,
    replicates: bool = False,
) -> None:
    """The command line of a capacity check: ``run [--states …] [--workers …] [--replicates R]``
    (``--replicates`` if asked) or ``show``."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("run")
    r.add_argument("--states", default=default_states)
    r.add_argument("--workers", default="1,2,4")
    if replicates:
        r.add_argument("--replicates", type=int, default=1)
    sub.add_parser("show")
    args = ap.parse_args()
    (run if args.mode == "run" else show)(args)
