"""Tumult Analytics as a real client: ``python examples/clients.py --mechanism tumult-count`` run as
its docstring says (tests/integration/_examples.py). It runs examples/tumult_client.py with the
interpreter of Tumult's own environment (``.venv-tumult`` at the repository root, made from
examples/tumult-requirements.txt when missing: if it cannot be made this test fails, naming the
step), 20 published runs of a per-county count in one Session at ε = 1 each, then `dpaudit run`
on them against the allocation file declaring Tumult's noise.

Expectations, none taken from the code under test: Tumult documents its count under a pure-DP
budget ε with ``AddOneRow`` as two-sided geometric noise of scale 1/ε (P(k) ∝ e^(−ε|k|)), whose
variance is 2e^(−ε)/(1 − e^(−ε))² (1.84 at ε = 1); the stored residuals are the published counts
minus the true ones; a geometric of scale 1 is exactly 1-DP. Tumult cannot be seeded: the variance
is checked within 6 standard errors of its estimate from 8,740 residuals.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from storage import schema as S
from storage import store
from tests.integration._examples import (
    EXAMPLES,
    TUMULT_VENV,
    copy_examples,
    docstring_commands,
    documented_env,
    epsilon_declared,
    run_as_documented,
)
from tests.integration._residuals import padded

pytestmark = [pytest.mark.integration, pytest.mark.slow]

COMMAND = "python examples/clients.py --mechanism tumult-count"
RUNS = 20  # the example's default --runs


def test_tumult_environment_can_be_made_or_is_there() -> None:
    """The environment examples/clients.py runs Tumult in: made here if missing (a failure to
    make it fails, never skips)."""
    import importlib.util
    import sys

    name = "clients_example_tumult"
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / "clients.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # its dataclasses resolve their annotations there
    spec.loader.exec_module(mod)
    try:
        python = mod.tumult_python(TUMULT_VENV)
    except RuntimeError as exc:
        pytest.fail(f"Tumult's environment could not be made: {exc}")
    assert python == TUMULT_VENV / "bin" / "python"


def test_tumult_count_published_and_audited_as_documented(
    prefect_harness: None, tmp_path: Path
) -> None:
    assert COMMAND in docstring_commands(EXAMPLES / "clients.py")
    root = tmp_path / "root"
    copy_examples(root)
    done = run_as_documented(".", COMMAND, root, documented_env(tmp_path / "logs"))
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    out = root / "results/clients"

    # what Tumult reports of its own noise, before the runs: geometric of scale 1/ε = 1
    info = json.loads((out / "tumult.json").read_text())
    assert info["noise"] == [{"mechanism": "geometric", "parameter": 1.0}]
    assert info["budget"] == {"epsilon": 1.0} and info["runs"] == RUNS
    assert info["library"].startswith("tmlt.analytics 0.21.")
    assert Path(info["pyspark_python"]) == TUMULT_VENV / "bin" / "python"

    df = pd.read_csv(out / "published.csv")
    runs = [f"dp{r}" for r in range(RUNS)]
    assert list(df.columns) == ["state", "county", "popamerindian", *runs]
    want = df[runs].to_numpy().T - df["popamerindian"].to_numpy()  # (run, county)
    assert (want != 0).any(axis=1).all()  # every run noisy

    res = padded(str(out / "audit.zarr"))
    assert res.sizes["replicate"] == RUNS
    n = int(res.n_items.sel(geolevel="county").values[0])
    assert n == len(df) == 437
    stored = res.residual.sel(geolevel="county").values[0, :, :n]
    truth = res.truth.sel(geolevel="county").values[0, :n]
    # the store orders the counties by (state, county): so does the table, sorted
    order = df.sort_values(["state", "county"]).index.to_numpy()
    np.testing.assert_array_equal(truth, df["popamerindian"].to_numpy()[order])
    np.testing.assert_array_equal(stored, want[:, order])

    a = math.exp(-1.0)
    law = 2 * a / (1 - a) ** 2  # the two-sided geometric of scale 1
    r = want.ravel()
    se = np.sqrt(np.var(r**2) / r.size)  # standard error of the mean square
    assert abs(np.mean(r**2) - law) < 6 * se, (np.mean(r**2), law, se)
    assert (r == np.round(r)).all()

    assert (out / "allocation.csv").read_text().splitlines() == [
        "geolevel,query,cells,mechanism,scale,neighbours",
        "County,total,1,geometric,1,add_remove",
    ]
    assert epsilon_declared(out / "audit.zarr", "County", 1e-10) == pytest.approx(1.0, rel=1e-6)
    epl = store.open_group(str(out / "audit.zarr"), S.EPL).sel(geolevel="county", query="total")
    assert np.isfinite(float(epl.epl_bias_aware))
    assert "declared in" in done.stdout and "EPL at county level" in done.stdout
