"""Releases made by third-party libraries, audited by a real `dpaudit run` (release.kind =
"observed"): OpenDP's count (records counted, discrete Laplace noise) and diffprivlib's Laplace on
the Midwest counts (plotnine). The EPL interval must agree with the ε each library claims (its
lower end at or below it) and flag a claim of half that ε (its lower end above it).

diffprivlib is seeded. OpenDP cannot be seeded; its run uses a 99.8 % interval, so the claim it
truly meets is wrongly refused with probability at most 0.1 %.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import diffprivlib  # noqa: F401  the clients extra: fail, never skip, without it
import numpy as np
import opendp  # noqa: F401
import pytest

from storage import schema as S
from storage import store
from tests.integration._residuals import padded

pytestmark = pytest.mark.integration


def load_example() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "examples" / "clients.py"
    spec = importlib.util.spec_from_file_location("clients_example_it", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["clients_example_it"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(
    ("name", "runs", "confidence", "n_boot"),
    [("opendp-count", 10, 0.998, 2000), ("diffprivlib-laplace", 20, 0.9, 200)],
)
def test_dpaudit_run_on_a_library_release(
    prefect_harness: None,
    dask_address: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    runs: int,
    confidence: float,
    n_boot: int,
) -> None:
    from prefect.settings import PREFECT_API_URL

    c = load_example()
    mech = c.MECHANISMS[name](1.0)
    spec, df = c.write_observed(mech, runs, 5, tmp_path, confidence=confidence, n_boot=n_boot)
    monkeypatch.setenv("PREFECT_API_URL", str(PREFECT_API_URL.value()))  # the session's API
    url = tmp_path / "audit.zarr"
    done = c.dpaudit_run(spec, url, "--no-report", "--scheduler", dask_address)
    assert done.returncode == 0, done.stderr[-3000:]
    res = padded(str(url))
    assert res.sizes["replicate"] == runs
    n = int(res.n_items.sel(geolevel="county").values[0])
    assert n == 437
    want = df[[f"dp{r}" for r in range(runs)]].to_numpy().T - df[c.COUNT].to_numpy()
    stored = res.residual.sel(geolevel="county").values[0, :, :n]
    # every county once: compare as sorted columns (the store orders units by state, county)
    np.testing.assert_allclose(np.sort(stored, axis=1), np.sort(want, axis=1), atol=1e-3)
    epl = store.open_group(str(url), S.EPL).sel(geolevel="county", query="total")
    lo, hi = float(epl.epl_ci_low), float(epl.epl_ci_high)
    assert lo <= mech.epsilon, (lo, hi)  # the library's claim stands
    assert lo > mech.epsilon / 2, (lo, hi)  # a claim of half is flagged
    assert S.ACCOUNTING in store.groups(str(url))  # the declared allocation's, beside it
