"""The audit's composed accounting of pl94_2021_production (US persons, add/remove, δ 1e-5/1e-10/1e-11,
200-point ε grid, the stored α grid, calibration at δ* = 1e-11), as one ``account`` task runs it.

    DPAUDIT_CACHE_DIR=DIR python benchmarks/bench_account_cache.py cold   # empty DIR: computes, stores
    DPAUDIT_CACHE_DIR=DIR python benchmarks/bench_account_cache.py warm   # a new process: a cache hit
    python benchmarks/bench_account_cache.py off                          # no persistent cache

Prints CPU seconds (``time.process_time``; the machine is shared) and the certified results.
"""

from __future__ import annotations

import os
import sys
import time


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


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cold")
