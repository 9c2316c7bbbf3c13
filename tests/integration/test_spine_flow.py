"""A TopDown-style audit on the US spine through the flow: the smallest state by block count, every
spine level in the store, the state total invariant; a bad spine spec exits 2 with no store."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from auditlib.geography.spine import LEVELS, generate_spine
from flows.spec import parse_spec
from storage import schema as S
from storage import store
from tests.integration._residuals import padded

pytestmark = pytest.mark.integration

SEED = 7  # population.seed: the spine's seed


def test_smallest_spine_state_through_the_flow(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    from prefect_dask import DaskTaskRunner

    from flows.audit.flow import audit_flow, run_id_for

    spine = generate_spine(SEED)
    blocks = spine.units_per_state("Block")
    smallest = int(np.argmin(blocks))
    label = f"ST{smallest + 1:02d}"
    s = parse_spec(
        {
            "audit": {"allocation": "pl94_2021_production", "replicates": 2, "seed": 11},
            "population": {"kind": "spine", "seed": SEED, "spine_states": [label]},
            "release": {"kind": "topdown"},
            "accounting": {"deltas": [1e-10], "eps_grid_points": 20, "composed": False},
        }
    )
    url = str(tmp_path / "spine.zarr")
    summary = audit_flow.with_options(task_runner=DaskTaskRunner(address=dask_address))(
        s, url, run_id_for(s)
    )
    assert summary["blocks"] == 1 + len(LEVELS)  # the nation + the state's 5 levels
    store.finalize(url)
    res = padded(url)
    assert list(res.state.values) == ["US", label]
    assert list(res.geolevel.values) == ["US", *LEVELS]
    n_items = res.n_items.values
    for gi, level in enumerate(LEVELS, start=1):  # one residual per unit of the state (total)
        assert n_items[1, gi] == int(np.sum(spine.state_of(level) == smallest)), level
        r = res.residual.values[1, gi, :, : n_items[1, gi]]
        assert np.isfinite(r).all()
        # consistency: every level's units sum to the invariant state total in each replicate
        np.testing.assert_array_equal(r.sum(axis=1), 0)
    state_total = int(spine.block_population[spine.state_of("Block") == smallest].sum())
    assert res.truth.values[1, 1, 0] == state_total
    np.testing.assert_array_equal(res.residual.values[1, 1, :, 0], 0)  # State total invariant
    np.testing.assert_array_equal(res.residual.values[0, 0, :, 0], 0)  # the nation = the state
    assert (res.residual.values[1, -1, :, : n_items[1, -1]] != 0).any()  # noisy blocks
    assert S.EPL in store.groups(url)


def test_bad_spine_spec_exits_2_without_a_store(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli.app import app

    spec = tmp_path / "bad.toml"
    target = tmp_path / "bad.zarr"
    for body, word in (
        ('[population]\nkind = "spine"\nspine_states = ["ST99"]\n[release]\nkind = "topdown"\n',
         "unknown state 'ST99'"),
        ('[population]\nkind = "spine"\n[release]\nkind = "allocation"\n',
         "needs population.kind = 'synthetic'"),
    ):  # fmt: skip
        spec.write_text(body)
        res = CliRunner().invoke(app, ["run", str(spec), "--store", str(target), "--no-report"])
        assert res.exit_code == 2, res.output
        assert word in res.output
        assert not target.exists()
