"""Sequential audits: the look schedule, the fixed-size special case, decisions and their errors.

* With one look (``batch = max_n``) sequential MPL is MPL: the same draws, the same LB as
  ``auditlib.mpl.mpl`` (the existing numbers are unchanged).
* Broken mechanisms (true parameter 1.5 times the claim) are refuted at the first look, with far
  fewer draws than the fixed-size method; correct ones are never refuted in these repetitions and
  are declared consistent when the tolerance allows.
* Every bound is taken at risk (1 − conf)/J per look: the sequential lower bound at the last look
  is below the fixed-size one on the same draws (the price of looking J times).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from auditlib.exceptions import InvalidParameterError
from auditlib.mpl import mpl
from auditlib.mpl.coverage import known_mechanism
from auditlib.mpl.sequential import (
    Claim,
    SequentialResult,
    look_schedule,
    sequential_mpl,
    sequential_tradeoff,
)
from auditlib.mpl.tradeoff_coverage import known_tradeoff


def audit_entry(name: str, parameter: float, claim: Claim, **kw: Any) -> SequentialResult:
    """:func:`sequential_tradeoff` of ``claim`` on the pair of the trade-off catalogue's entry
    ``name`` at ``parameter``."""
    k = known_tradeoff(name, parameter)
    return sequential_tradeoff(k.mechanism, k.x, k.x_prime, claim, **kw)


def test_look_schedule_doubles_up_to_the_budget() -> None:
    assert look_schedule(1000, 1000) == [1000]
    assert look_schedule(1000, 5000) == [1000, 2000, 4000, 5000]
    with pytest.raises(InvalidParameterError, match="batch"):
        look_schedule(2000, 1000)


def test_one_look_is_the_fixed_size_mpl() -> None:
    e = known_mechanism("geometric_count", 0.7)
    kw = dict(n=5_000, region=e.region, alpha=0.05)
    seq = sequential_mpl(
        e.mechanism, e.pairs, 0.7, batch=12_500, max_n=12_500, rng=np.random.default_rng(4), **kw
    )
    ref = mpl(e.mechanism, e.pairs, n_confidence=12_500, rng=np.random.default_rng(4), **kw)
    assert seq.lower == ref.lb and seq.looks == seq.planned_looks == 1
    assert seq.draws == 2 * (len(e.pairs) * 5_000 + 12_500)


@pytest.mark.parametrize(("name", "claim"), [("laplace", 0.7), ("randomized_response_k4", 0.7)])
def test_sequential_mpl_decides_early(name: str, claim: float) -> None:
    good = known_mechanism(name, claim)
    bad = known_mechanism(
        "laplace_broken" if name == "laplace" else "randomized_response_broken", claim
    )
    kw = dict(n=5_000, batch=3_125, max_n=50_000, tolerance=0.2)
    for r in range(6):
        g = sequential_mpl(
            good.mechanism,
            good.pairs,
            claim,
            region=good.region,
            rng=np.random.default_rng(r),
            **kw,
        )
        b = sequential_mpl(
            bad.mechanism, bad.pairs, claim, region=bad.region, rng=np.random.default_rng(r), **kw
        )
        assert g.decision == "consistent" and g.n < 50_000
        assert b.decision == "refuted" and b.looks == 1 and b.lower > claim
        assert g.risk_per_look == pytest.approx(0.05 / 5)


def test_sequential_curve_refutes_broken_and_accepts_correct() -> None:
    kw = dict(n_select=5_000, batch=5_000, max_n=80_000, tolerance=0.2)
    for r in range(5):
        res = audit_entry(
            "gaussian_broken", 1.0, Claim("mu", 1.0), rng=np.random.default_rng(r), **kw
        )
        assert res.decision == "refuted" and res.n == 5_000 and res.draws == 20_000
        ok = audit_entry(
            "randomized_response", 1.0, Claim("epsilon", 1.0), rng=np.random.default_rng(r), **kw
        )
        assert ok.decision == "consistent" and ok.lower <= 1.0 < ok.upper <= 1.2
        assert [h[0] for h in ok.history] == look_schedule(5_000, 80_000)[: ok.looks]


def test_looking_costs_width() -> None:
    g = known_tradeoff("gaussian", 1.0)
    claim = Claim("mu", 1.0)  # the truth: not refuted, not consistent at tolerance 0: all looks
    kw = dict(n_select=5_000, max_n=40_000, tolerance=0.0)
    seq = sequential_tradeoff(
        g.mechanism, g.x, g.x_prime, claim, batch=5_000, rng=np.random.default_rng(1), **kw
    )
    one = sequential_tradeoff(
        g.mechanism, g.x, g.x_prime, claim, batch=40_000, rng=np.random.default_rng(1), **kw
    )
    assert seq.decision == one.decision == "undecided" and seq.looks == 4
    assert seq.risk_per_look == pytest.approx(one.risk_per_look / 4)
    assert 0.8 < seq.lower < one.lower <= 1.0  # wider at the same n; both below the true μ = 1


def test_bad_input_is_refused() -> None:
    g = known_tradeoff("gaussian", 1.0)
    rng = np.random.default_rng(0)
    with pytest.raises(InvalidParameterError, match="claimed mu"):
        Claim("mu", -1.0)
    with pytest.raises(InvalidParameterError, match="claim parameter"):
        Claim("rho", 1.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="tolerance"):
        sequential_tradeoff(
            g.mechanism,
            0.0,
            1.0,
            Claim("mu", 1.0),
            n_select=100,
            batch=100,
            max_n=100,
            rng=rng,
            tolerance=-1,
        )
    with pytest.raises(InvalidParameterError, match="Claim"):
        sequential_tradeoff(
            g.mechanism,
            0.0,
            1.0,
            1.0,
            n_select=100,
            batch=100,
            max_n=100,
            rng=rng,  # type: ignore[arg-type]
        )
    e = known_mechanism("laplace", 0.7)
    with pytest.raises(InvalidParameterError, match="claimed_epsilon"):
        sequential_mpl(
            e.mechanism,
            e.pairs,
            float("inf"),
            n=100,
            batch=100,
            max_n=100,
            region=e.region,
            rng=rng,
        )
