"""The audit's composed accounting of pl94_2021_production (US persons, add/remove, δ 1e-5/1e-10/1e-11,
200-point ε grid, the stored α grid, calibration at δ* = 1e-11), as one ``account`` task runs it.

    DPAUDIT_CACHE_DIR=DIR python benchmarks/bench_account_cache.py cold   # empty DIR: computes, stores
    DPAUDIT_CACHE_DIR=DIR python benchmarks/bench_account_cache.py warm   # a new process: a cache hit
    python benchmarks/bench_account_cache.py off                          # no persistent cache
    python benchmarks/bench_account_cache.py rounds 5 [OLD_TREE]   # 5 cold runs, fresh processes

Prints CPU seconds (``time.process_time``; the machine is shared) and the certified results.
``rounds N``: N ``cold`` runs, each in a fresh process on an empty cache directory, and their
median CPU-s (``_timing.alternate``); with ``OLD_TREE`` (a checkout of another revision, run with
its own ``benchmarks/bench_account_cache.py``) its cold runs alternate with this tree's, and the
ratio of the medians is printed. The CPU-s are each process's own, of the ``account`` task alone
(not its imports).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path


def main(label: str) -> None:
    import numpy as np

    from auditlib.accounting import bureau_epsilon
    from auditlib.allocations import load_allocation
    from flows.audit.account_cache import account_cached
    from flows.audit.groups import ALPHA_GRID

    alloc = load_allocation("pl94_2021_production")
    levels = alloc.geolevels("persons", "US")
    rho = max(float(alloc.rho("persons", "US", g)) for g in levels)
    grid = np.linspace(0.0, float(bureau_epsilon(rho, 1e-11)) * 1.05, 200)
    cpu, wall = time.process_time(), time.perf_counter()
    comps = alloc.components("add_remove", "persons", "US", None)
    out = account_cached(
        "pl94_2021_production",
        "add_remove",
        "persons",
        "US",
        None,
        comps,
        [1e-5, 1e-10, 1e-11],
        grid,
        ALPHA_GRID,
        1e-11,
        use_cache=label != "off",
    )
    print(f"{label}: machine {os.uname().machine}, load {os.getloadavg()[0]:.1f}")
    print(
        f"  CPU {time.process_time() - cpu:.3f} s, wall {time.perf_counter() - wall:.3f} s;"
        f" factor [{out['calibration_factor_lower']!r}, {out['calibration_factor_upper']!r}];"
        f" eps widths {out['eps_exact_upper'] - out['eps_exact_lower']}"
    )


def cold_in(tree: Path) -> object:
    """One ``cold`` run of ``tree``'s benchmark in a fresh process on an empty cache directory."""
    from _timing import child_timed

    with tempfile.TemporaryDirectory() as cache:
        return child_timed(
            [sys.executable, str(tree / "benchmarks" / "bench_account_cache.py"), "cold"],
            cwd=tree,
            env=dict(os.environ, DPAUDIT_CACHE_DIR=cache, PYTHONPATH=str(tree)),
            pattern=r"CPU (?P<cpu>[0-9.]+) s, wall (?P<wall>[0-9.]+) s;.*",
            label=tree.name,
        )


def rounds(n: int, old: str | None) -> None:
    """``n`` cold runs in fresh processes (alternated with ``old``'s, if given); medians."""
    from _machine import machine_info
    from _timing import alternate, method_line

    here = Path(__file__).resolve().parent.parent
    print(machine_info())
    print(method_line(n, 0) + " (each run a fresh process: its own CPU-s of the task)")
    if old is None:  # this tree's cold runs alone (the second callable does nothing)
        p = alternate(lambda: cold_in(here), lambda: None, rounds=n, warmup=0)
        print(
            f"cold: median {p.median_cpu(0):.2f} CPU-s, runs {sorted(p.cpu[0])}; load {p.load_range}"
        )
        return
    p = alternate(
        lambda: cold_in(Path(old).resolve()), lambda: cold_in(here), rounds=n, warmup=0,
        labels=("old", "new"),
    )  # fmt: skip
    print(p.line(2))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "rounds":
        rounds(int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else "cold")
