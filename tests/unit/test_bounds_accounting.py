"""Size bounds of the accountants: trade-off points, convolution work and lattice size.

Each bound is refused at once — within a second, without allocating (``tests/unit/_bounds.py``) —
naming the value given and the largest allowed; a value at the bound is accepted where that is
cheap to show.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from auditlib.accounting import (
    MAX_LATTICE,
    MAX_TRADEOFF_POINTS,
    MAX_WORK,
    DiscreteGaussianComposition,
    DiscreteGaussianLoss,
    PrivacyLossComposition,
    check_max_work,
    check_tradeoff_points,
    tradeoff,
    zcdp_tradeoff,
)
from tests._ceilings import PROCESS_CEILING_S
from tests.unit._bounds import refused

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def small_comp() -> DiscreteGaussianComposition:
    return DiscreteGaussianComposition([(Fraction(4), 1)])


def test_tradeoff_points_are_bounded(small_comp: DiscreteGaussianComposition) -> None:
    assert MAX_TRADEOFF_POINTS == 100_000
    refused(lambda: check_tradeoff_points(10**9), "Invalid points: 1000000000", "100000")
    refused(lambda: check_tradeoff_points(1), "Invalid points: 1")
    assert check_tradeoff_points(MAX_TRADEOFF_POINTS) == MAX_TRADEOFF_POINTS
    # a billion alphas as a view of one float: no memory until the curve would be evaluated
    huge = np.broadcast_to(np.float64(0.5), (10**9,))
    refused(lambda: tradeoff(small_comp, huge), "Invalid alpha: 1000000000 values", "100000")
    refused(lambda: zcdp_tradeoff(2.0, huge), "Invalid alpha: 1000000000 values", "100000")
    over = np.broadcast_to(np.float64(0.5), (MAX_TRADEOFF_POINTS + 1,))
    refused(lambda: tradeoff(small_comp, over), "Invalid alpha: 100001 values")
    # at the bound: the whole curve of a small composition, equal to the one-point value
    at = tradeoff(small_comp, np.full(MAX_TRADEOFF_POINTS, 0.3))
    one = tradeoff(small_comp, 0.3)
    assert np.all(np.asarray(at.lower) == one.lower)
    assert np.all(np.asarray(at.upper) == one.upper)


def test_max_work_and_lattice_are_bounded() -> None:
    comps = [(Fraction(4), 2), (Fraction(7, 3), 1)]
    refused(
        lambda: DiscreteGaussianComposition(comps, max_work=1e300),
        "Invalid max_work: 1e+300",
        "largest allowed is 1e+12",
    )
    refused(
        lambda: PrivacyLossComposition([DiscreteGaussianLoss(4.0, 2)], max_work=1e13),
        "Invalid max_work: 1e+13",
        "1e+12",
    )
    refused(
        lambda: DiscreteGaussianComposition(comps, max_lattice=10**9),
        "Invalid max_lattice: 1000000000",
        str(MAX_LATTICE),
    )
    refused(lambda: check_max_work(2e12), "Invalid max_work: 2e+12")
    assert check_max_work(MAX_WORK) == MAX_WORK
    # at the bounds: budgets only, the composition spends what it needs
    at = DiscreteGaussianComposition(comps, max_work=MAX_WORK, max_lattice=MAX_LATTICE)
    ref = DiscreteGaussianComposition(comps)
    assert at.method == ref.method
    assert at.delta(1.0).upper == ref.delta(1.0).upper


def test_the_account_command_refuses_a_huge_budget_at_once(tmp_path: Path) -> None:
    """The real command: exit 2 with one error line, in seconds of CPU (it used to run for
    minutes)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = subprocess.run(
        [sys.executable, "-m", "flows.cli", "account", "--cumulative", "--max-work", "1e300"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=PROCESS_CEILING_S,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpaudit: error: Invalid max_work: 1e+300")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    assert cpu < 30, f"refused after {cpu:.1f} CPU s"  # CPU, whatever the machine's load
    assert list(tmp_path.iterdir()) == [] or all(p.name.startswith(".") for p in tmp_path.iterdir())
