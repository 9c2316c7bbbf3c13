"""Releases made by third-party libraries, audited by a real `dpaudit run` (release.kind =
"observed") against the allocation file the example writes beside them (the library's mechanism
and noise scale at the claimed ε): OpenDP's count (records counted, discrete Laplace noise) and
diffprivlib's Laplace on the Midwest counts (plotnine). The EPL interval must agree with the ε each
library claims (its lower end at or below it) and flag a claim of half that ε (its lower end above
it); the store's accounting is the declared mechanism's exact ε. A half claim declared in the
allocation file leaves the residuals as they are and halves the declared accounting.

diffprivlib is seeded. OpenDP cannot be seeded; its run uses a 99.8 % interval, so the claim it
truly meets is wrongly refused with probability at most 0.1 %.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import diffprivlib  # noqa: F401  the clients extra: fail, never skip, without it
import numpy as np
import opendp  # noqa: F401
import pandas as pd
import pytest

from storage import schema as S
from storage import store
from tests.integration._examples import load_example
from tests.integration._residuals import padded

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def api(prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """`dpaudit run` reporting to the session's Prefect API."""
    from prefect.settings import PREFECT_API_URL

    monkeypatch.setenv("PREFECT_API_URL", str(PREFECT_API_URL.value()))


def audited(c: ModuleType, spec: Path, dask_address: str) -> str:
    url = spec.parent / "audit.zarr"
    done = c.dpaudit_run(spec, url, "--no-report", "--scheduler", dask_address)
    assert done.returncode == 0, done.stderr[-3000:]
    return str(url)


def stored_residuals(url: str, runs: int) -> np.ndarray:
    """The county residuals of the store, (run, county) in the store's unit order."""
    res = padded(url)
    assert res.sizes["replicate"] == runs
    n = int(res.n_items.sel(geolevel="county").values[0])
    assert n == 437
    return np.asarray(res.residual.sel(geolevel="county").values[0, :, :n])


def declared_rows(directory: Path) -> list[dict[str, str]]:
    rows = pd.read_csv(directory / "allocation.csv", dtype=str).to_dict("records")
    return [{k: v for k, v in r.items() if isinstance(v, str)} for r in rows]


def declared_eps(url: str, delta: float) -> float:
    acc = store.open_group(url, S.ACCOUNTING)
    assert list(acc.geolevel.values) == ["County"]  # the one level the file declares
    return float(acc.eps_exact_upper.sel(geolevel="County", delta=delta))


@pytest.mark.parametrize(
    ("name", "runs", "confidence", "n_boot"),
    [("opendp-count", 10, 0.998, 2000), ("diffprivlib-laplace", 20, 0.9, 200)],
)
def test_dpaudit_run_on_a_library_release(
    api: None,
    dask_address: str,
    tmp_path: Path,
    name: str,
    runs: int,
    confidence: float,
    n_boot: int,
) -> None:
    c = load_example("clients.py", "clients_example_it")
    mech = c.MECHANISMS[name](1.0)
    spec, df = c.write_observed(mech, runs, 5, tmp_path, confidence=confidence, n_boot=n_boot)
    url = audited(c, spec, dask_address)
    stored = stored_residuals(url, runs)
    want = df[[f"dp{r}" for r in range(runs)]].to_numpy().T - df[c.COUNT].to_numpy()
    # every county once: compare as sorted columns (the store orders units by state, county)
    np.testing.assert_allclose(np.sort(stored, axis=1), np.sort(want, axis=1), atol=1e-3)
    epl = store.open_group(url, S.EPL).sel(geolevel="county", query="total")
    lo, hi = float(epl.epl_ci_low), float(epl.epl_ci_high)
    assert lo <= mech.epsilon, (lo, hi)  # the library's claim stands
    assert lo > mech.epsilon / 2, (lo, hi)  # a claim of half is flagged
    # the declared allocation is the library's mechanism at scale 1/ε = 1, and its exact ε is ε
    kind = {"opendp-count": "geometric", "diffprivlib-laplace": "laplace"}[name]
    assert declared_rows(tmp_path) == [
        {
            "geolevel": "County",
            "query": "total",
            "cells": "1",
            "mechanism": kind,
            "scale": "1",
            "neighbours": "add_remove",
        }
    ]
    assert declared_eps(url, 1e-10) == pytest.approx(mech.epsilon, rel=1e-6)


def test_a_half_claim_declares_half_the_accounting_of_the_same_residuals(
    api: None, dask_address: str, tmp_path: Path
) -> None:
    c = load_example("clients.py", "clients_example_it")
    mech = c.MECHANISMS["diffprivlib-laplace"](1.0)  # seeded: both tables are the same draws
    runs = 10
    true_spec, true_df = c.write_observed(mech, runs, 7, tmp_path / "true")
    half_spec, half_df = c.write_observed(mech, runs, 7, tmp_path / "half", claim=0.5)
    pd.testing.assert_frame_equal(true_df, half_df)
    assert [r["scale"] for r in declared_rows(tmp_path / "true")] == ["1"]
    assert [r["scale"] for r in declared_rows(tmp_path / "half")] == ["2"]  # Laplace b = 1/0.5

    true_url = audited(c, true_spec, dask_address)
    half_url = audited(c, half_spec, dask_address)
    want = true_df[[f"dp{r}" for r in range(runs)]].to_numpy().T - true_df[c.COUNT].to_numpy()
    for url in (true_url, half_url):
        got = stored_residuals(url, runs)
        np.testing.assert_allclose(np.sort(got, axis=1), np.sort(want, axis=1), atol=1e-3)
    np.testing.assert_array_equal(
        stored_residuals(true_url, runs), stored_residuals(half_url, runs)
    )

    assert declared_eps(true_url, 1e-10) == pytest.approx(1.0, rel=1e-6)
    assert declared_eps(half_url, 1e-10) == pytest.approx(0.5, rel=1e-6)
    # the residuals say ε ≈ 1 either way: the true claim's EPL interval holds its lower end
    # below 1, the half claim's lies above 0.5
    epl = store.open_group(half_url, S.EPL).sel(geolevel="county", query="total")
    assert 0.5 < float(epl.epl_ci_low) <= 1.0

    # the verdict on the declared claim, on these same residuals: the true claim consistent, the
    # half claim refuted, both tested at the county rows
    for url, want_verdict in ((true_url, "consistent"), (half_url, "refuted")):
        claims = store.open_group(url, S.CLAIMS).sel(geolevel="County")
        assert str(claims.claim_verdict.values) == want_verdict, claims.claim_sentence.values
        evidence = json.loads(str(claims.claim_evidence.values))
        assert evidence["measured_at"] == "county" and evidence["n"] == 437 * runs
