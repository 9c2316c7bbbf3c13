"""Size bounds of the simulations: direct replicates and runs, residual blocks, populations.

Each bound is refused at once — within a second, without allocating (``tests/unit/_bounds.py``) —
naming the value given and the largest allowed; a value at the bound is accepted where that is
cheap to show.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from auditlib.epl.direct import direct_chunk
from auditlib.geography.flaxman import MAX_PEOPLE, check_population_size, generate_population
from auditlib.simulate.direct import (
    MAX_RELEASE_BYTES,
    MAX_REPLICATES,
    Allocation,
    Target,
    TopDown,
    check_runs,
    release_range,
    released_values,
)
from auditlib.simulate.hierarchical import CountTree, simulate_residuals
from auditlib.simulate.neighbours import move_between_areas
from auditlib.simulate.neighbours_hist import HistogramDatabase, add_person
from auditlib.simulate.release import MAX_BLOCK_BYTES
from auditlib.simulate.topdown import StateHierarchy, residual_blocks
from tests.unit._bounds import refused


def test_direct_replicates_and_runs_are_bounded(histograms: HistogramDatabase) -> None:
    pair = add_person(histograms, 2, "white")
    kw: dict[str, Any] = {"level": "block", "unit": 2, "start": 0, "stop": 10, "seed": 1}
    refused(
        lambda: release_range(pair, Allocation(4.0), replicates=10**12, **kw),
        "Invalid replicates: 1000000000000",
        str(MAX_REPLICATES),
    )
    td = TopDown.of([[("total", 1.0)], [("total", 2.0)], [("total", 4.0)]])
    g = np.random.default_rng(0)
    msg = refused(
        lambda: released_values(td, histograms, 10**9, g, level="block", unit=2),
        "Invalid n: 1000000000 runs of TopDown",
        "GiB",
    )
    most = int(re.search(r"the largest allowed is (\d+)", msg).group(1))  # type: ignore[union-attr]
    t = Target.check(histograms, "block", 2, "total", 0)
    assert check_runs(most, td, histograms, t) == most  # at the bound: accepted
    refused(lambda: check_runs(most + 1, td, histograms, t), f"Invalid n: {most + 1}")
    # the chunk of a replicate range is the same bound, named as the chunk
    refused(
        lambda: release_range(pair, td, replicates=10**7, chunk=10**7, **kw),
        "Invalid chunk: 10000000 runs of TopDown",
    )
    # TopDown copies its state's histogram cells a run; the allocation computes one value a run,
    # so its bound is MAX_RELEASE_BYTES / 128 runs at once
    refused(
        lambda: check_runs(MAX_RELEASE_BYTES // 128 + 1, Allocation(4.0), histograms, t),
        "Invalid n",
    )
    one = check_runs(MAX_RELEASE_BYTES // 128, Allocation(4.0), histograms, t)
    assert one == MAX_RELEASE_BYTES // 128
    a, b = release_range(pair, Allocation(4.0), replicates=MAX_REPLICATES, **kw)
    assert a.shape == b.shape == (10,)


def test_residual_blocks_are_bounded() -> None:
    tree = CountTree((np.array([30]), np.array([10, 20])), (np.array([0, 0]),))
    msg = refused(
        lambda: simulate_residuals(tree, "gdpc", 1.0, seed=1, replicates=10**9),
        "Invalid replicates: 1000000000",
        "GiB",
    )
    most = int(re.search(r"the largest allowed here is (\d+)", msg).group(1))  # type: ignore[union-attr]
    assert most == MAX_BLOCK_BYTES // (2 * 4)
    h = StateHierarchy.from_fanouts(("State", "Block"), (4,))
    refused(
        lambda: residual_blocks(
            h,
            np.ones((4, 2), dtype=np.int64),
            {"total": np.ones((1, 2))},
            [[("total", 1.0)], [("total", 1.0)]],
            {"total": 0},
            lambda r: [np.random.default_rng(r)] * 2,
            10**9,
        ),
        "Invalid replicates: 1000000000",
    )


def test_populations_are_bounded() -> None:
    refused(
        lambda: generate_population(10**12, 3, 100.0, seed=1),
        "Invalid N (n_people): 1000000000000",
        str(MAX_PEOPLE),
    )
    refused(
        lambda: generate_population(10**6, 3, 1e-6, seed=1),
        "Invalid mu (mean_per_location): 1e-06",
        str(MAX_PEOPLE),
    )


def test_population_sizes_are_checked_without_drawing() -> None:
    refused(lambda: check_population_size(MAX_PEOPLE + 1, 3, 100.0), str(MAX_PEOPLE + 1))
    h = check_population_size(MAX_PEOPLE, 3, 100.0)  # at the bound: the hierarchy, no people
    assert h.n_leaves <= MAX_PEOPLE


def test_flaxman_direct_chunks_are_bounded() -> None:
    pair = move_between_areas(generate_population(2_000, 2, 20.0, seed=1), 0, 5)
    refused(
        lambda: direct_chunk(pair, "gdpc", 1.0, level=2, unit=0, start=0, stop=10**12, seed=1),
        "Invalid replicate range: 0..1000000000000",
        str(MAX_REPLICATES),
    )
    a, b = direct_chunk(
        pair, "gdpc", 1.0, level=2, unit=0, start=MAX_REPLICATES - 3, stop=MAX_REPLICATES, seed=1
    )
    assert a.shape == b.shape == (3,)
