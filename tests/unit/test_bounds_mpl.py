"""Size bounds of MPL: draws, regions, the hockey-stick grid, coverage repetitions.

Each bound is refused at once — within a second, without allocating (``tests/unit/_bounds.py``) —
naming the value given and the largest allowed; a value at the bound is accepted where that is
cheap to show.
"""

from __future__ import annotations

import re

import numpy as np

from auditlib.mechanisms import DiscreteGaussian
from auditlib.mpl import geometric_count, laplace_mechanism, mpl
from auditlib.mpl.coverage import MAX_REPETITIONS, check_coverage_sizes, coverage_chunk
from auditlib.mpl.dpl import MAX_REGION_POINTS, Region
from auditlib.mpl.hockey import hockey_stick, hockey_stick_exact
from auditlib.mpl.protocol import MAX_SAMPLE_SIZE, check_sample_size
from tests.unit._bounds import refused


def test_sample_sizes_are_bounded() -> None:
    e = laplace_mechanism(0.7)
    g = np.random.default_rng(1)
    refused(
        lambda: e.mechanism.sample(e.pairs[0][0], 10**12, g),
        "Invalid n: 1000000000000",
        str(MAX_SAMPLE_SIZE),
    )
    d = geometric_count(0.7)  # discrete: no bandwidth condition on n and N
    refused(
        lambda: mpl(d.mechanism, d.pairs, n=2000, n_confidence=10**10, region=d.region, rng=g),
        "Invalid n_confidence: 10000000000",
    )
    refused(lambda: check_sample_size("n", MAX_SAMPLE_SIZE + 1), f"{MAX_SAMPLE_SIZE + 1}")
    assert check_sample_size("n", MAX_SAMPLE_SIZE) == MAX_SAMPLE_SIZE


def test_regions_are_bounded() -> None:
    refused(
        lambda: Region.box([(0, 1)] * 3, grid_size=1000),
        "grid_size^d = 1000^3 = 1000000000 points",
        str(MAX_REGION_POINTS),
    )
    refused(lambda: Region.integers((0, 10**12)), "1000000000001 points", str(MAX_REGION_POINTS))
    assert Region.integers((0, MAX_REGION_POINTS - 1)).points.size == MAX_REGION_POINTS
    assert Region.box([(0, 1)] * 2, grid_size=1000).points.shape == (10**6, 2)


def test_hockey_stick_grids_are_bounded() -> None:
    dg = DiscreteGaussian(25.0)
    k = np.arange(-20_000, 20_001)
    lp = dg.logpmf(k)
    lq = dg.logpmf(k - 1)
    eps = np.linspace(0.0, 2.0, 2_000)  # 2,000 x 40,001 cells: about 3.6 GiB
    msg = refused(lambda: hockey_stick_exact(lp, lq, eps), "Invalid epsilons: 2000 values")
    most = int(re.search(r"the largest epsilon grid allowed here is (\d+)", msg).group(1))  # type: ignore[union-attr]
    assert 8 * k.size * (4 + 6 * most) <= 2 * 2**30 < 8 * k.size * (4 + 6 * (most + 1))
    # the bound itself would take its 2 GiB; a small grid on the same support runs
    assert hockey_stick_exact(lp, lq, eps[:10]).shape == (10,)
    # from samples: 10^5 draws over 400,000 integers and 200 epsilons would need about 3.6 GiB;
    # reading the draws takes a few MB, the cell arrays are never built
    g = np.random.default_rng(3)
    x = g.integers(0, 400_000, size=100_000)
    refused(
        lambda: hockey_stick(x, x, x[:10], x[:10], np.linspace(0, 1, 200), kind="discrete"),
        f"Invalid epsilons: 200 values over {int(x.max() - x.min()) + 2} cells",
        peak_bytes=16 * 2**20,
    )


def test_coverage_repetitions_are_bounded() -> None:
    refused(
        lambda: coverage_chunk("laplace", 0.7, 0, 10**12, n=100, n_confidence=100, seed=1),
        "Invalid repetitions 0..1000000000000",
        str(MAX_REPETITIONS),
    )
    refused(lambda: check_coverage_sizes(10**9, 20_000, 50_000), "Invalid repetitions: 1000000000")
    refused(lambda: check_coverage_sizes(100, 20_000, 10**8), "Invalid n_confidence: 100000000")
    refused(lambda: check_coverage_sizes(100, 5, 50), "Invalid n: 5")
    assert check_coverage_sizes(MAX_REPETITIONS, 10, MAX_SAMPLE_SIZE) == (
        MAX_REPETITIONS,
        10,
        MAX_SAMPLE_SIZE,
    )
    r = coverage_chunk(
        "laplace", 0.7, MAX_REPETITIONS - 1, MAX_REPETITIONS, n=500, n_confidence=500, seed=1
    )
    assert r["lb"].shape == (1,)
