"""The direct route over the production schemas: one state of two blocks (one unit per level above),
D′ one person more; CPU-s to resolve the experiment (D, D′, the release) and of ``n`` runs of the
release at once, for ``pl94`` (28 cells) beside ``pl94_production`` (2,016) and ``dhc_production``
(1,227,744), and the peak RSS of the process.

    PYTHONPATH=. python benchmarks/bench_direct_production.py
"""

from __future__ import annotations

import resource
import time

import numpy as np
from _machine import machine_info

from auditlib.simulate.direct import released_values
from flows.experiments.direct_runs import SpecDirectParams, spec_experiment
from flows.spec import parse_spec

PL94 = ("County", "Tract", "Block_Group", "Block")
DHC = ("County", "Prim", "Tract_Subset_Group", "Tract_Subset", "Block_Group", "Block")


def spec(attributes: str, kind: str) -> str:
    dhc = attributes == "dhc_production"
    fanout = {g: 1 for g in (DHC if dhc else PL94)}
    fanout["Block"] = 2
    allocation = "dhc_2023_production" if dhc else "pl94_2021_production"
    return parse_spec(
        {
            "audit": {"allocation": allocation, "seed": 9},
            "population": {"states": 1, "fanout": fanout, "attributes": attributes,
                           "mean_block_population": 20.0, "empty_block_share": 0.0},
            "release": {"kind": kind},
        }
    ).to_toml()  # fmt: skip


def main() -> None:
    print(machine_info())
    cases = [
        ("pl94", "topdown", "total", 1),
        ("pl94_production", "topdown", "total", 1),
        ("pl94_production", "allocation", "detailed", 4000),
        ("dhc_production", "allocation", "detailed", 4000),
    ]
    for attributes, kind, query, n in cases:
        cell = "3780" if attributes == "dhc_production" else "0"  # an adult householder (DHC)
        p = SpecDirectParams(
            spec=spec(attributes, kind), change="add", to_block=1, to_cell=cell, query=query
        )
        t = time.process_time()
        e = spec_experiment(p)
        resolve = time.process_time() - t
        t = time.process_time()
        released_values(
            e.release, e.pair.d, n, np.random.default_rng(0), level=e.level, unit=e.unit,
            query=e.query, cell=e.cell,
        )  # fmt: skip
        runs = time.process_time() - t
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"{attributes:16s} {kind:10s} resolve {resolve:6.2f} CPU-s; {n} runs {runs:7.2f} "
            f"CPU-s; peak RSS so far {rss:.0f} MB",
            flush=True,
        )


if __name__ == "__main__":
    main()
