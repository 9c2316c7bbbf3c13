"""``dpaudit fdp-coverage`` on a real Dask cluster: the empirical f-DP points' coverage per
(mechanism, parameter, band), the same numbers with one worker or two and as the pure function, and
resumable like ``mpl-coverage``: SIGKILL the command once some chunks are marked done, re-run it,
and the published group is identical to an undisturbed run's; a resumed flow computes only the
chunks not marked done."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from auditlib.mpl.tradeoff_coverage import known_tradeoff, tradeoff_coverage
from storage import checksums, store
from tests.integration._processes import done_markers, dpaudit, resume, run_until, standalone_env
from tests.integration._stores import (
    array_digests,
    assert_resumed_coverage,
    assert_same_as_undisturbed,
)

pytestmark = pytest.mark.integration

BANDS = ("clopper-pearson", "dkw")


def _flow(address: str):  # type: ignore[no-untyped-def]
    from prefect_dask import DaskTaskRunner

    from flows.experiments.fdp_coverage import fdp_coverage_flow

    return fdp_coverage_flow.with_options(task_runner=DaskTaskRunner(address=address))


@pytest.mark.slow
def test_fdp_coverage_flow_on_dask_with_one_and_two_workers(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    from distributed import LocalCluster

    from flows.experiments.fdp_coverage import GROUP

    mechs, params, reps, chunk = ["gaussian", "gaussian_broken"], [1.0], 30, 10
    kw = {"n_select": 2_000, "n": 10_000, "conf": 0.95, "tests": 16, "seed": 7}
    two = str(tmp_path / "two.zarr")
    out = _flow(dask_address)(two, mechs, params, reps, chunk=chunk, **kw)
    assert out == {"cells": 2, "tasks": 6, "computed": 6, "resumed": 0}
    assert store.groups(two) == [GROUP]  # the per-chunk parts are assembled, then removed
    store.finalize(two)
    checksums.check(two)
    ds = store.open_group(two, GROUP)
    assert ds.covered.dims == ("mechanism", "parameter", "band", "rep")
    assert list(ds.band.values) == list(BANDS) and ds.sizes["rep"] == reps

    # the flow's numbers are the pure function's on the whole range, whatever the chunking
    for mi, name in enumerate(mechs):
        known = known_tradeoff(name, 1.0)
        want = tradeoff_coverage(known, 0, reps, cell=(mi, 0), bands=BANDS, **kw)
        for b in BANDS:
            got = ds.sel(mechanism=name, parameter=1.0, band=b)
            np.testing.assert_array_equal(got.covered.values, want[b]["covered"])
            np.testing.assert_array_equal(got.mu_lower.values, want[b]["mu_lower"])
            np.testing.assert_array_equal(got.epsilon_lower.values, want[b]["epsilon_lower"])
            np.testing.assert_array_equal(got.plugin_covered.values, want[b]["plugin_covered"])
        assert float(ds.mu.sel(mechanism=name, parameter=1.0)) == pytest.approx(known.mu)
    ok = ds.sel(mechanism="gaussian", parameter=1.0)
    broken = ds.sel(mechanism="gaussian_broken", parameter=1.0)
    # a correct mechanism: every point on or above its curve in >= conf of repetitions (30 reps:
    # 3 binomial sd); its μ bound errs low, so it rarely refutes the claim μ = 1
    assert (ok.coverage.values >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / reps)).all()
    assert (ok.detection.values <= 0.2).all()
    # the plug-in points sit on either side of the curve: far below the nominal level
    assert (ok.plugin_coverage.values < 0.5).all()
    # broken (true μ = 1.5, claims 1): refuted in most repetitions, its bound below the truth
    assert float(broken.mu) == pytest.approx(1.5)
    assert (broken.detection.values >= 0.9).all()
    assert (broken.median_mu_lower.values <= 1.5).all()

    # the same run on a cluster of one worker gives identical arrays
    one = str(tmp_path / "one.zarr")
    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        _flow(cluster.scheduler_address)(one, mechs, params, reps, chunk=chunk, **kw)
    store.finalize(one)
    got, want_digests = array_digests(one), array_digests(two)
    assert len(want_digests) >= 10 and got == want_digests


def test_resumed_fdp_flow_computes_only_the_unfinished_chunks(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    """A chunk marked done holds sentinel bounds (99): a resumed run keeps them (it did not
    recompute that chunk) and computes the others, which match the pure function."""
    from flows.experiments.fdp_coverage import GROUP, PARTS, fdp_coverage_run_id

    kw = {"n_select": 1_000, "n": 5_000, "conf": 0.9, "tests": 8, "seed": 3}
    url = str(tmp_path / "fdp.zarr")
    run_id = fdp_coverage_run_id(["laplace"], [0.5, 2.0], 20, *kw.values(), 10)
    # an interrupted run: the template and chunk 1 of cell (0, 1) finished
    store.claim_staging(url, run_id)
    rep, cell = (1, 2, 2, 20), (1, 2, 2)
    arrays = {
        "covered": (rep, (1, 1, 2, 10), "bool"),
        "plugin_covered": (rep, (1, 1, 2, 10), "bool"),
        "mu_lower": (rep, (1, 1, 2, 10), "float64"),
        "epsilon_lower": (rep, (1, 1, 2, 10), "float64"),
        "refuted": (rep, (1, 1, 2, 10), "bool"),
        **{
            k: (cell, (1, 1, 1), "float64")
            for k in ("mu", "epsilon", "claimed_mu", "claimed_epsilon")
        },
    }
    assert store.chunk_parts(url, PARTS, arrays, cell) == set()
    reps, one = (0, 1, slice(None), slice(10, 20)), (0, 1, slice(1, 2))
    known = known_tradeoff("laplace", 2.0)
    sentinel = {
        "covered": (reps, np.ones((2, 10), bool)),
        "plugin_covered": (reps, np.zeros((2, 10), bool)),
        "mu_lower": (reps, np.full((2, 10), 99.0)),
        "epsilon_lower": (reps, np.full((2, 10), 99.0)),
        "refuted": (reps, np.ones((2, 10), bool)),
        "mu": (one, np.array([known.mu])),
        "epsilon": (one, np.array([known.epsilon])),
        "claimed_mu": (one, np.array([known.claimed_mu])),
        "claimed_epsilon": (one, np.array([known.claimed_epsilon])),
    }
    store.write_part(url, PARTS, (0, 1, 1), sentinel)

    summary = _flow(dask_address)(url, ["laplace"], [0.5, 2.0], 20, chunk=10, **kw)
    assert summary == {"cells": 2, "tasks": 4, "computed": 3, "resumed": 1}
    store.finalize(url)
    ds = store.open_group(url, GROUP)
    np.testing.assert_array_equal(ds.mu_lower.values[0, 1, :, 10:], 99.0)  # kept
    first = tradeoff_coverage(known, 0, 10, cell=(0, 1), bands=BANDS, **kw)
    whole = tradeoff_coverage(known_tradeoff("laplace", 0.5), 0, 20, cell=(0, 0), bands=BANDS, **kw)
    for bi, b in enumerate(BANDS):
        np.testing.assert_array_equal(ds.mu_lower.values[0, 1, bi, :10], first[b]["mu_lower"])
        np.testing.assert_array_equal(ds.mu_lower.values[0, 0, bi], whole[b]["mu_lower"])


@pytest.mark.slow
def test_killed_fdp_coverage_resumes_to_the_undisturbed_group(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    from flows.experiments.fdp_coverage import PARTS, fdp_coverage_run_id

    mechs, params, reps, chunk, n_chunks = ["gaussian", "laplace"], [1.0], 60, 10, 12
    n_select, n, conf, tests, seed = 20_000, 100_000, 0.95, 32, 11  # ~0.6 s a chunk: killed midway
    run_id = fdp_coverage_run_id(mechs, params, reps, n_select, n, conf, tests, seed, chunk)
    target = tmp_path / "out" / "fdp.zarr"
    staging = Path(store.staging_path(str(target), run_id))
    args = [a for m in mechs for a in ("-m", m)] + ["-p", "1", "--reps", str(reps)]
    args += ["--n-select", str(n_select), "--n", str(n), "--seed", str(seed)]
    cmd = [*dpaudit(), "fdp-coverage", *args, "--store", str(target)]
    env = standalone_env()

    two = "second chunk marked done"  # in 300 s: the embedded API server starts first
    run_until(cmd, env, tmp_path, lambda: done_markers(staging, PARTS) >= 2, 300, two)
    assert not target.exists()  # nothing published
    done = store.done_parts(str(staging), PARTS)
    assert 2 <= len(done) < n_chunks, len(done)

    # the same command again: resumes the finished chunks, publishes, cleans up
    again = resume(cmd, env, tmp_path, run_id, 300)
    assert_resumed_coverage(again.stdout, len(done), n_chunks, target, "fdp_coverage")
    assert "gaussian" in again.stdout and "clopper-pearson" in again.stdout

    # an undisturbed run (in-process, another cluster) gives identical arrays
    ref = str(tmp_path / "ref.zarr")
    summary = _flow(dask_address)(ref, mechs, params, reps, n_select, n, conf, tests, seed, chunk)
    assert_same_as_undisturbed(summary, n_chunks, ref, target)


def test_report_of_an_fdp_coverage_store_shows_its_coverage(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    """``dpaudit report`` on an fdp-coverage store: the coverage table (per mechanism, claim and
    band, the stored numbers) and the lower bounds' eCDFs, and no audit sections or absences."""
    import base64
    import re

    from flows.experiments.fdp_coverage import GROUP
    from flows.report.render import render_report

    mechs, params, reps = ["gaussian", "laplace_broken"], [1.0], 10
    kw = {"n_select": 2_000, "n": 10_000, "conf": 0.9, "tests": 16, "seed": 5}
    url = str(tmp_path / "fdp.zarr")
    _flow(dask_address)(url, mechs, params, reps, chunk=10, **kw)
    store.finalize(url)
    ds = store.open_group(url, GROUP)
    html = render_report(url, tmp_path / "r.html").read_text(encoding="utf-8")
    assert "written by dpaudit fdp-coverage" in html
    assert 'id="at-a-glance"' not in html and 'id="missing"' not in html
    start = html.index('<section id="fdp-coverage">')
    section = html[start : html.index("</section>", start)]
    assert "1. Coverage of the empirical f-DP points" in section and "2. Provenance" in html
    assert f"{reps} repetitions" in section and re.search(r"confidence\s+0\.9\)", section)
    rows = re.findall(r'<tr><td class="level">(.*?)</tr>', section, re.S)
    assert len(rows) == len(mechs) * len(params) * len(BANDS)
    cells = [re.findall(r"<td[^>]*>([^<]*)</td>", "<td>" + r) for r in rows]
    for k, name in enumerate(mechs):
        kind, symbol = ("mu", "μ") if name == "gaussian" else ("epsilon", "ε")
        for b in range(len(BANDS)):
            c = cells[k * len(BANDS) + b]
            assert c[0] == name and c[1] == f"{symbol} = 1"
            assert c[2] == f"{float(ds[kind].values[k, 0]):.4g}"
            assert c[4] == f"{float(ds.coverage.values[k, 0, b]):.3g}"
            assert c[5] == f"{float(ds.plugin_coverage.values[k, 0, b]):.3g}"
            assert c[6] == f"{float(np.median(ds[f'{kind}_lower'].values[k, 0, b])):.4g}"
            assert c[7] == f"{float(ds.detection.values[k, 0, b]):.3g}"
    png = re.search(
        r'<figure id="fig-fdp-coverage">\s*<img src="data:image/png;base64,([^"]+)"', section
    )
    assert png is not None and base64.b64decode(png.group(1))[:4] == b"\x89PNG"
