"""The experiment commands: ``sweep`` (the accounting of every allocation, on Dask),
``mpl-coverage`` (MPL lower bounds on mechanisms with known ε, on Dask) and ``fdp-coverage`` (the
empirical f-DP points on mechanisms with exact trade-off curves, on Dask)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from auditlib.exceptions import DPAuditError, InvalidParameterError
from flows.cli.errors import fail
from flows.cli.execute import (
    check_target_and_scheduler,
    execute_resumable,
    print_prefect_link,
    publish_artifacts,
)
from flows.cli.options import Neighbours, OverwriteOption, SchedulerOption
from flows.runtime.cluster import apply_prefect_defaults

if TYPE_CHECKING:
    from storage.result_store import ResultStore


def sweep(
    allocation: Annotated[
        list[str] | None, typer.Option("--allocation", "-a", help="Allocation(s); default: all.")
    ] = None,
    neighbours: Annotated[
        list[Neighbours] | None, typer.Option("--neighbours", "-n", help="Default: both.")
    ] = None,
    delta: Annotated[
        list[float] | None, typer.Option("--delta", "-d", help="δ value(s) in (0, 1).")
    ] = None,
    store_url: Annotated[
        str, typer.Option("--store", help="Output store.")
    ] = "results/accounting.zarr",
    points: Annotated[int, typer.Option("--points", help="ε grid points of the curves.")] = 200,
    scheduler: Annotated[
        str, typer.Option("--scheduler", help="Dask scheduler address; empty: local cluster.")
    ] = "",
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace the store.")] = False,
) -> None:
    """Account every allocation × universe × region × level × neighbour relation on Dask."""
    apply_prefect_defaults()
    from auditlib.allocations import list_allocations, load_allocation
    from flows.audit.artifacts import experiment_artifacts
    from flows.experiments.sweep import accounting_sweep_flow, plan_jobs, sweep_run_id
    from storage.result_store import ResultStore

    allocs = allocation or list_allocations()
    nbs = [n.value for n in neighbours] if neighbours else ["add_remove", "bounded"]
    deltas = sorted(set(delta or [1e-5, 1e-10, 1e-11]), reverse=True)
    try:
        for a in allocs:
            alloc = load_allocation(a)  # an allocation file: checked row by row (any mechanism)
            for nb in nbs:
                alloc.check_relation(nb)
        for d in deltas:
            if not (math.isfinite(d) and 1e-20 <= d < 1):
                raise InvalidParameterError(f"Invalid delta: {d!r}; must be in [1e-20, 1)")
        if not 10 <= points <= 5000:
            raise InvalidParameterError(f"Invalid --points: {points}; allowed 10..5000")
        store = ResultStore.at(store_url)
        cluster = check_target_and_scheduler(store, overwrite, scheduler)
    except DPAuditError as exc:
        fail(str(exc))
    run_id = sweep_run_id(allocs, nbs, deltas, points)
    t0 = time.perf_counter()
    summary, api_url, embedded = execute_resumable(
        accounting_sweep_flow,
        lambda staging: (staging, allocs, nbs, deltas, points),
        store,
        cluster,
        run_id,
        overwrite=overwrite,
        parts="jobs",
    )
    n = len(plan_jobs(allocs, nbs))
    typer.echo(f"sweep {run_id}: {n} jobs, {time.perf_counter() - t0:.1f} s")
    typer.echo(f"store:  {store_url} (group 'accounting_sweep')")
    publish_artifacts(
        api_url,
        embedded,
        summary["flow_run_id"],
        lambda: experiment_artifacts("sweep", run_id, store, "accounting_sweep"),
    )
    print_prefect_link(api_url, embedded, summary["flow_run_id"])


#: the names of auditlib.mpl.coverage.CATALOGUE, for --help without importing it (a test checks)
MPL_CATALOGUE_NAMES = (
    "laplace, laplace_broken, report_noisy_max, exponential, continuous_noisy_max, "
    "geometric_count, gdpc_count, adpc_count, census_dg_count, randomized_response, randomized_response_k4, "
    "randomized_response_broken, svt2, svt4, svt5, svt6"
)
#: repetitions per Prefect task of a coverage experiment (part of its run id)
COVERAGE_CHUNK = 10


def refuse_repeats(given: tuple[tuple[str, list[str]], ...]) -> None:
    """:class:`InvalidParameterError` naming an option given the same value twice."""
    for what, values in given:
        dup = sorted({v for v in values if values.count(v) > 1})
        if dup:
            raise InvalidParameterError(
                f"Invalid {what}: {', '.join(dup)} given twice; give each value once."
            )


def run_coverage(
    kind: str,
    checks: Callable[[], None],
    flow: Callable[..., Any],
    args: Callable[[ResultStore], tuple[Any, ...]],
    run_id: Callable[[], str],
    table: Callable[[Any], list[str]],
    group: str,
    store_url: str,
    scheduler: str,
    overwrite: bool,
) -> None:
    """A coverage experiment ``kind`` (``mpl-coverage``, ``fdp-coverage``): ``checks`` and the
    store and scheduler checked (bad input: exit 2), ``flow`` run resumably on Dask with
    ``args(staging)``, the ``table`` of its ``group`` printed, its artifacts and link published."""
    from flows.audit.artifacts import experiment_artifacts
    from storage.result_store import ResultStore

    try:
        checks()
        store = ResultStore.at(store_url)
        cluster = check_target_and_scheduler(store, overwrite, scheduler)
    except DPAuditError as exc:
        fail(str(exc))
    rid = run_id()
    summary, api_url, embedded = execute_resumable(
        flow, args, store, cluster, rid, overwrite=overwrite, parts="chunks"
    )
    ds = store.open_group(group)
    try:
        for line in table(ds):
            typer.echo(line)
    finally:
        ds.close()
    typer.echo(f"store:  {store_url} (group {group!r})")
    publish_artifacts(
        api_url,
        embedded,
        summary["flow_run_id"],
        lambda: experiment_artifacts(kind, rid, store, group),
    )
    print_prefect_link(api_url, embedded, summary["flow_run_id"])


def mpl_coverage_table(ds: Any) -> list[str]:
    """Per mechanism × ε₀: ε*_C, coverage, the share of bounds above the claim and the median
    bound (at or below 0: vacuous, :mod:`flows.report.mpl_bound`)."""
    import numpy as np

    from flows.report.mpl_bound import fmt_lb

    lines = [
        f"{'mechanism':<27} {'eps0':>6} {'eps*_C':>8} {'coverage':>9} {'LB > claim':>11} "
        f"{'median LB':>12}"
    ]
    for m in ds.mechanism.values:
        for e0 in ds.epsilon0.values:
            c = ds.sel(mechanism=m, epsilon0=e0)
            lb = np.asarray(c.lb.values, dtype=float)
            lb = lb[np.isfinite(lb)]
            median = fmt_lb(float(np.median(lb)), 4) if lb.size else "—"
            lines.append(
                f"{m!s:<27} {e0:6.2f} {float(c.epsilon_c):8.4f} {float(c.coverage):9.3f} "
                f"{float(c.exceeds_claim):11.3f} {median:>12}"
            )
    return lines


def mpl_coverage(
    mechanism: Annotated[
        list[str] | None,
        typer.Option(
            "--mechanism",
            "-m",
            help=f"Catalogue mechanism(s), repeatable: {MPL_CATALOGUE_NAMES}. Default: laplace.",
        ),
    ] = None,
    epsilon: Annotated[
        list[float] | None,
        typer.Option("--epsilon", "-e", help="Claimed ε₀ (default 0.2 0.7 1.5)."),
    ] = None,
    repetitions: Annotated[int, typer.Option("--reps", help="Repetitions per cell.")] = 100,
    n: Annotated[int, typer.Option("--n", help="Draws per input, step 1.")] = 20_000,
    n_confidence: Annotated[
        int, typer.Option("--N", help="Fresh draws, confidence step.")
    ] = 50_000,
    alpha: Annotated[float, typer.Option("--alpha", help="1 − confidence level.")] = 0.05,
    seed: Annotated[int, typer.Option("--seed")] = 2022,
    store_url: Annotated[str, typer.Option("--store")] = "results/mpl.zarr",
    scheduler: SchedulerOption = "",
    overwrite: OverwriteOption = False,
) -> None:
    """MPL coverage experiments (Askin, Kutta & Dette §V) on mechanisms with known ε, fanned out on Dask."""
    apply_prefect_defaults()
    from auditlib.mpl.coverage import CATALOGUE, check_coverage_sizes
    from flows.experiments.mpl_coverage import GROUP, coverage_run_id, mpl_coverage_flow

    mechs = mechanism or ["laplace"]
    eps = epsilon or [0.2, 0.7, 1.5]
    chunk = COVERAGE_CHUNK

    def checks() -> None:
        for m in mechs:
            if m not in CATALOGUE:
                raise InvalidParameterError(
                    f"Unknown mechanism: {m!r}; allowed: {', '.join(CATALOGUE)}"
                )
        for e in eps:
            if not (math.isfinite(e) and e > 0):
                raise InvalidParameterError(f"Invalid epsilon: {e!r}; must be > 0")
        refuse_repeats((("--mechanism", mechs), ("--epsilon", [f"{e:g}" for e in eps])))
        if not 0 < alpha < 1:
            raise InvalidParameterError(f"Invalid alpha: {alpha!r}; must be in (0, 1)")
        check_coverage_sizes(repetitions, n, n_confidence)  # each in its range, bounded above

    run_coverage(
        "mpl-coverage",
        checks,
        mpl_coverage_flow,
        lambda staging: (staging, mechs, eps, repetitions, n, n_confidence, alpha, seed, chunk),
        lambda: coverage_run_id(mechs, eps, repetitions, n, n_confidence, alpha, seed, chunk),
        mpl_coverage_table,
        GROUP,
        store_url,
        scheduler,
        overwrite,
    )


#: the names of auditlib.mpl.tradeoff_coverage.TRADEOFF_CATALOGUE, for --help (a test checks)
FDP_CATALOGUE_NAMES = (
    "gaussian, gaussian_broken, laplace, laplace_broken, randomized_response, "
    "randomized_response_k4, randomized_response_broken, dg_count, dg_count_broken"
)


def fdp_coverage_table(ds: Any) -> list[str]:
    """Per mechanism × parameter × band: coverage, the plug-in points' coverage, the median μ and
    ε lower bounds beside the true μ and ε, the share refuting the claim."""
    lines = [
        f"{'mechanism':<27} {'param':>6} {'band':<16} {'coverage':>9} {'plug-in':>8} "
        f"{'μ_lb':>7} {'μ':>7} {'ε_lb':>7} {'ε':>7} {'refuted':>8}"
    ]
    for m in ds.mechanism.values:
        for p in ds.parameter.values:
            c = ds.sel(mechanism=m, parameter=p)
            for b in ds.band.values:
                cb = c.sel(band=b)
                lines.append(
                    f"{m!s:<27} {p:6.2f} {b!s:<16} {float(cb.coverage):9.3f} "
                    f"{float(cb.plugin_coverage):8.3f} {float(cb.median_mu_lower):7.3f} "
                    f"{float(c.mu):7.3f} {float(cb.median_epsilon_lower):7.3f} "
                    f"{float(c.epsilon):7.3f} {float(cb.detection):8.3f}"
                )
    return lines


def fdp_coverage(
    mechanism: Annotated[
        list[str] | None,
        typer.Option(
            "--mechanism",
            "-m",
            help=f"Mechanism(s) with an exact trade-off curve, repeatable: {FDP_CATALOGUE_NAMES}. "
            "Default: gaussian.",
        ),
    ] = None,
    parameter: Annotated[
        list[float] | None,
        typer.Option(
            "--parameter",
            "-p",
            help="Claimed μ (gaussian, dg_count) or ε (laplace, randomized response); "
            "default 0.5 1 2.",
        ),
    ] = None,
    repetitions: Annotated[int, typer.Option("--reps", help="Repetitions per cell.")] = 100,
    n_select: Annotated[
        int, typer.Option("--n-select", help="Draws per input that select the tests.")
    ] = 20_000,
    n: Annotated[int, typer.Option("--n", help="Fresh draws per input that certify.")] = 100_000,
    conf: Annotated[float, typer.Option("--conf", help="Simultaneous confidence level.")] = 0.95,
    tests: Annotated[int, typer.Option("--tests", help="Threshold tests (points) K.")] = 32,
    seed: Annotated[int, typer.Option("--seed")] = 2026,
    store_url: Annotated[str, typer.Option("--store")] = "results/fdp.zarr",
    scheduler: SchedulerOption = "",
    overwrite: OverwriteOption = False,
) -> None:
    """Coverage of the empirical f-DP points on mechanisms with exact trade-off curves, on Dask."""
    apply_prefect_defaults()
    from auditlib.mpl.protocol import check_sample_size
    from auditlib.mpl.tradeoff_coverage import MAX_TRADEOFF_REPETITIONS, known_tradeoff
    from auditlib.mpl.tradeoff_lower import check_conf, check_tests
    from flows.experiments.fdp_coverage import GROUP, fdp_coverage_flow, fdp_coverage_run_id

    mechs = mechanism or ["gaussian"]
    params = parameter or [0.5, 1.0, 2.0]
    chunk = COVERAGE_CHUNK
    settings = (repetitions, n_select, n, conf, tests, seed, chunk)

    def checks() -> None:
        for p in params:
            if not (math.isfinite(p) and p > 0):
                raise InvalidParameterError(f"Invalid parameter: {p!r}; must be > 0")
        for m in mechs:
            for p in params:
                known_tradeoff(m, p)  # an unknown name or a parameter the entry refuses
        refuse_repeats((("--mechanism", mechs), ("--parameter", [f"{p:g}" for p in params])))
        if not 1 <= repetitions <= MAX_TRADEOFF_REPETITIONS:
            raise InvalidParameterError(
                f"Invalid --reps: {repetitions}; allowed 1..{MAX_TRADEOFF_REPETITIONS}"
            )
        check_sample_size("--n-select", n_select)
        check_sample_size("--n", n)
        check_conf(conf)
        check_tests(tests)

    run_coverage(
        "fdp-coverage",
        checks,
        fdp_coverage_flow,
        lambda staging: (staging, mechs, params, *settings),
        lambda: fdp_coverage_run_id(mechs, params, *settings),
        fdp_coverage_table,
        GROUP,
        store_url,
        scheduler,
        overwrite,
    )
