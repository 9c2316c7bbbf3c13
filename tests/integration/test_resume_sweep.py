"""``dpaudit sweep`` resumes: a re-run on a store with jobs marked done accounts only the others and
ends with the group an undisturbed run writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from storage import store
from tests.integration.test_resume import array_digests

pytestmark = pytest.mark.integration


@pytest.mark.slow
def test_resumed_sweep_accounts_only_the_unfinished_jobs(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    from prefect_dask import DaskTaskRunner

    from flows.experiments.sweep import GROUP, PARTS, accounting_sweep_flow, sweep_run_id

    args = (["dhcp_20220825_paper"], ["add_remove"], [1e-5, 1e-10], 30)
    flow = accounting_sweep_flow.with_options(task_runner=DaskTaskRunner(address=dask_address))
    ref = str(tmp_path / "ref.zarr")
    assert flow(ref, *args) == {"jobs": 9, "computed": 9, "resumed": 0}
    store.finalize(ref)
    want = store.open_group(ref, GROUP)

    # an interrupted run: the parts template and job 3 done (copied from the reference, but with a
    # sentinel rho that only survives if the resumed run does not account job 3 again)
    url = str(tmp_path / "sweep.zarr")
    store.claim_staging(url, sweep_run_id(*args))
    nd, ng = 2, 30
    arrays: dict[str, tuple[tuple[int, ...], tuple[int, ...], str]] = {
        "rho": ((9,), (1,), "float64"),
        "n_queries": ((9,), (1,), "int64"),
        "sigma2_min": ((9,), (1,), "float64"),
        "sigma2_max": ((9,), (1,), "float64"),
        "method": ((9,), (1,), "str"),
        **{
            k: ((9, nd), (1, nd), "float64")
            for k in ("eps_exact_lower", "eps_exact_upper", "eps_bureau", "eps_cks")
        },
        **{k: ((9, ng), (1, ng), "float64") for k in ("delta_exact_upper", "delta_bureau")},
    }
    assert store.chunk_parts(url, PARTS, arrays, (9,)) == set()
    one, row = (slice(3, 4),), (slice(3, 4), slice(None))
    values = {k: (row if len(s[0]) == 2 else one, want[k].values[3:4]) for k, s in arrays.items()}
    values["method"] = (one, want.method.values[3:4].astype(object))
    values["rho"] = (one, np.array([123.0]))
    store.write_part(url, PARTS, (3,), values)
    assert flow(url, *args) == {"jobs": 9, "computed": 8, "resumed": 1}
    store.finalize(url)
    got = store.open_group(url, GROUP)
    assert float(got.rho[3]) == 123.0  # kept, not accounted again
    np.testing.assert_array_equal(np.delete(got.rho.values, 3), np.delete(want.rho.values, 3))

    # with job 3's true results, the resumed store equals the undisturbed one
    again = str(tmp_path / "again.zarr")
    store.claim_staging(again, sweep_run_id(*args))
    store.chunk_parts(again, PARTS, arrays, (9,))
    values["rho"] = (one, want.rho.values[3:4])
    store.write_part(again, PARTS, (3,), values)
    assert flow(again, *args)["computed"] == 8
    store.finalize(again)
    assert array_digests(again) == array_digests(ref)
