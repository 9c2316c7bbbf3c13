"""``dpaudit direct`` resumes: a re-run on a store with chunks marked done computes only the others,
and ends with the group an undisturbed run writes; another experiment on that store is refused."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from auditlib.exceptions import StoreError
from storage import store
from tests.integration.test_resume import array_digests

pytestmark = pytest.mark.integration


@pytest.mark.slow
def test_resumed_direct_flow_computes_only_the_unfinished_chunks(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    from prefect_dask import DaskTaskRunner

    from flows.experiments.direct_loss import GROUP, PARTS, direct_flow, direct_run_id
    from flows.experiments.direct_runs import DirectParams

    p = DirectParams(
        people=5_000, levels=2, mean_per_location=20.0, algorithm="gdpc", epsilon=1.0,
        to_leaf=100, replicates=400, chunk=100, seed=4, min_events=20,
    )  # fmt: skip
    flow = direct_flow.with_options(task_runner=DaskTaskRunner(address=dask_address))
    ref = str(tmp_path / "ref.zarr")
    out = flow(ref, p)
    assert (out["tasks"], out["computed"], out["resumed"]) == (4, 4, 0)
    assert store.groups(ref) == [GROUP]  # the parts are assembled, then removed
    store.finalize(ref)
    want = store.open_group(ref, GROUP).error.values

    # an interrupted run: chunks 0 and 2 finished, chunk 2 holding a sentinel
    url = str(tmp_path / "direct.zarr")
    assert not store.claim_staging(url, direct_run_id(p))
    spec = {"error": ((2, 400), (2, 100), "float64")}
    assert store.chunk_parts(url, PARTS, spec, (4,)) == set()
    store.write_part(url, PARTS, (0,), {"error": ((slice(None), slice(0, 100)), want[:, :100])})
    store.write_part(url, PARTS, (2,), {"error": ((slice(None), slice(200, 300)), np.full((2, 100), 7.0))})  # fmt: skip
    out = flow(url, p)
    assert (out["tasks"], out["computed"], out["resumed"]) == (4, 2, 2)
    store.finalize(url)
    got = store.open_group(url, GROUP).error.values
    np.testing.assert_array_equal(got[:, 200:300], 7.0)  # kept, not recomputed
    np.testing.assert_array_equal(got[:, :200], want[:, :200])
    np.testing.assert_array_equal(got[:, 300:], want[:, 300:])

    # with the true chunk 2 instead, the resumed store equals the undisturbed one
    again = str(tmp_path / "again.zarr")
    store.claim_staging(again, direct_run_id(p))
    store.chunk_parts(again, PARTS, spec, (4,))
    store.write_part(again, PARTS, (2,), {"error": ((slice(None), slice(200, 300)), want[:, 200:300])})  # fmt: skip
    assert flow(again, p)["computed"] == 3
    store.finalize(again)
    assert array_digests(again) == array_digests(ref)

    # another experiment (another seed) on that unfinished store is refused, naming the fix
    other = str(tmp_path / "other.zarr")
    store.claim_staging(other, direct_run_id(p))
    assert direct_run_id(replace(p, seed=5)) != direct_run_id(p)
    assert direct_run_id(replace(p)) == direct_run_id(p)
    with pytest.raises(StoreError, match=r"unfinished run of a different command.*--overwrite"):
        flow(other, replace(p, seed=5))
