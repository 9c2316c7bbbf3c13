"""MPL coverage experiments as a flow: mechanisms × ε₀ × repetition chunks fanned out on Dask.

Each task runs one chunk of repetitions of one (mechanism, ε₀) cell (``auditlib.mpl.coverage``) and
returns its bounds (a few floats); the flow writes the Zarr group ``mpl_coverage`` with ``lb``
(mechanism, epsilon0, rep), the exact targets ``epsilon_c`` / ``epsilon`` and the empirical coverage
P(LB ≤ ε*_C) per cell.

For the audit flow: :func:`mpl_task_settings` (the spec's ``[mpl]`` section as the arguments of one
``mpl-geolevel`` task) and :func:`mpl_dataset` (the tasks' results as the store's ``mpl`` group,
layout in ``storage/schema.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr
from prefect import flow, task

from auditlib.mpl.coverage import coverage_chunk
from auditlib.mpl.fdp_gap import fdp_gap
from flows.audit.tasks import TASK_OPTS
from flows.experiments.chunked import grid_chunks, repetition_chunks, run_chunked, run_id_of
from storage import schema as S
from storage.result_store import ResultStore

if TYPE_CHECKING:
    from flows.spec import AuditSpec

GROUP = "mpl_coverage"


#: the per-chunk results of an unfinished run (staging only; assembled into GROUP, then removed)
PARTS = "mpl_coverage_parts"


def coverage_run_id(
    mechanisms: list[str],
    epsilons: list[float],
    repetitions: int,
    n: int,
    n_confidence: int,
    alpha: float,
    seed: int,
    chunk: int,
) -> str:
    """The run id of what determines the numbers and the chunking (not the store or cluster)."""
    key = [list(mechanisms), [float(e) for e in epsilons], repetitions, n, n_confidence]
    return run_id_of([*key, float(alpha), seed, chunk])


@task(name="mpl-chunk", **TASK_OPTS)
def mpl_chunk(
    store: ResultStore,
    name: str,
    eps: float,
    start: int,
    stop: int,
    cell: tuple[int, int],
    index: int,
    settings: dict[str, Any],
) -> int:
    """Run repetitions ``start..stop-1`` of one cell and write them as chunk ``index`` (its marker
    last); returns the number of repetitions."""
    r = coverage_chunk(name, eps, start, stop, cell=cell, **settings)
    mi, ei = cell
    k = stop - start
    reps = (mi, ei, slice(start, stop))
    one = (mi, ei, slice(index, index + 1))
    store.write_part(
        PARTS,
        (mi, ei, index),
        {
            "lb": (reps, np.asarray(r["lb"], dtype=float)),
            "floor_driven": (reps, np.asarray(r["floor_driven"], dtype=bool)),
            "edge": (reps, np.asarray(r.get("edge", np.zeros(k, bool)), dtype=bool)),
            "epsilon_c": (one, np.array([r["epsilon_c"]], dtype=float)),
            "epsilon": (one, np.array([r["epsilon"]], dtype=float)),
            "claimed_epsilon": (one, np.array([r.get("claimed_epsilon", eps)], dtype=float)),
        },
    )
    return k


@flow(name="dpaudit-mpl-coverage", validate_parameters=False)
def mpl_coverage_flow(
    store: ResultStore | str,
    mechanisms: list[str],
    epsilons: list[float],
    repetitions: int,
    n: int = 20_000,
    n_confidence: int = 50_000,
    alpha: float = 0.05,
    seed: int = 2022,
    chunk: int = 10,
) -> dict[str, Any]:
    """Resumable: each chunk writes its results and done-marker to the ``mpl_coverage_parts``
    group as it finishes; a re-run on the same store computes only the chunks not marked done, then
    assembles the ``mpl_coverage`` group and removes the parts."""
    settings = {"n": n, "n_confidence": n_confidence, "alpha": alpha, "seed": seed}
    run_id = coverage_run_id(mechanisms, epsilons, repetitions, n, n_confidence, alpha, seed, chunk)
    shape = (len(mechanisms), len(epsilons))
    ranges = repetition_chunks(repetitions, chunk)
    rep, grid = (*shape, repetitions), (*shape, len(ranges))
    layout = {
        "lb": (rep, (1, 1, chunk), "float64"),
        "floor_driven": (rep, (1, 1, chunk), "bool"),
        "edge": (rep, (1, 1, chunk), "bool"),
        "epsilon_c": (grid, (1, 1, 1), "float64"),
        "epsilon": (grid, (1, 1, 1), "float64"),
        "claimed_epsilon": (grid, (1, 1, 1), "float64"),
    }
    chunks = grid_chunks(
        mechanisms,
        epsilons,
        ranges,
        lambda name, eps, start, stop: f"mpl {name} eps={eps:g} reps {start}-{stop - 1}",
        settings,
    )

    def assemble(parts: dict[str, np.ndarray]) -> xr.Dataset:
        results = {}
        for mi, ei, ci in np.ndindex(grid):
            start, stop = ranges[ci]
            results[mi, ei, start] = {
                "lb": parts["lb"][mi, ei, start:stop],
                "floor_driven": parts["floor_driven"][mi, ei, start:stop],
                "edge": parts["edge"][mi, ei, start:stop],
                **{k: parts[k][mi, ei, ci] for k in ("epsilon_c", "epsilon", "claimed_epsilon")},
            }
        return coverage_dataset(results, mechanisms, epsilons, repetitions, settings)

    run = run_chunked(store, run_id, GROUP, PARTS, layout, grid, chunks, mpl_chunk, assemble)
    return {"cells": shape[0] * shape[1], **run.counts()}


def coverage_dataset(
    results: dict[tuple[int, int, int], dict[str, Any]],
    mechanisms: list[str],
    epsilons: list[float],
    repetitions: int,
    settings: dict[str, Any],
) -> xr.Dataset:
    """The ``mpl_coverage`` group from chunk results keyed by (mechanism, ε₀ index, first rep)."""
    alpha = settings["alpha"]
    shape = (len(mechanisms), len(epsilons))
    lb = np.full((*shape, repetitions), np.nan)
    floor = np.zeros((*shape, repetitions), dtype=bool)
    edge = np.zeros((*shape, repetitions), dtype=bool)
    eps_c = np.full(shape, np.nan)
    eps_true = np.full(shape, np.nan)
    claimed = np.full(shape, np.nan)
    for (mi, ei, start), r in results.items():
        k = len(r["lb"])
        lb[mi, ei, start : start + k] = r["lb"]
        floor[mi, ei, start : start + k] = r["floor_driven"]
        if "edge" in r:
            edge[mi, ei, start : start + k] = r["edge"]
        eps_c[mi, ei], eps_true[mi, ei] = r["epsilon_c"], r["epsilon"]
        claimed[mi, ei] = r.get("claimed_epsilon", epsilons[ei])
    coverage = (lb <= eps_c[..., None]).mean(axis=-1)
    ds = xr.Dataset(
        {
            "lb": (("mechanism", "epsilon0", "rep"), lb),
            "floor_driven": (("mechanism", "epsilon0", "rep"), floor),
            "edge": (("mechanism", "epsilon0", "rep"), edge),
            "epsilon_c": (("mechanism", "epsilon0"), eps_c),
            "epsilon": (("mechanism", "epsilon0"), eps_true),
            "claimed_epsilon": (("mechanism", "epsilon0"), claimed),
            "coverage": (("mechanism", "epsilon0"), coverage),
            "exceeds_claim": (("mechanism", "epsilon0"), (lb > claimed[..., None]).mean(axis=-1)),
        },
        coords={
            "mechanism": np.array(mechanisms, dtype=object),
            "epsilon0": np.asarray(epsilons, dtype=float),
            "rep": np.arange(repetitions),
        },
        attrs={
            "alpha": alpha,
            "n": settings["n"],
            "n_confidence": settings["n_confidence"],
            "seed": settings["seed"],
            "lb": "lower confidence bound on epsilon_c per repetition: the raw estimate, which may "
            "be < 0 (a bound <= 0 is vacuous, epsilon >= 0 always; reports show it as 0)",
            "coverage": "share of repetitions with LB <= epsilon_c (the exact loss over the tested "
            "pairs and region); expected >= 1 - alpha for correct mechanisms",
            "exceeds_claim": "share of repetitions with LB > claimed_epsilon (a detection for "
            "broken mechanisms); claimed_epsilon is epsilon0 except for mechanisms that claim no "
            "pure epsilon (inf: the discrete Gaussian, whose epsilon0 sets sigma = 1/epsilon0)",
        },
    )
    return ds


def mpl_task_settings(spec: AuditSpec) -> dict[str, Any]:
    """Keyword arguments of :func:`auditlib.mpl.audit.mpl_geolevel` from the spec."""
    m, a = spec.mpl, spec.audit
    return {
        "seed": a.seed,
        "n": m.n,
        "n_confidence": m.n_confidence,
        "alpha": m.alpha,
        "tau": m.tau,
        "delta_epsilons": list(m.delta_epsilons),
        "release": spec.release.kind,
        "allocation": a.allocation,
        "neighbours": a.neighbours,
        "universe": a.universe,
        "region": a.region,
        "query": m.query,
        "count": m.count,
        "pairs": list(m.pairs),
        "radius_sd": m.radius_sd,
        "postprocess": spec.simulation.postprocess,
        "release_epsilon": spec.release.epsilon,
        "fdp": m.fdp,
    }


#: per-geolevel scalars of one mpl-geolevel result, stored as (geolevel,) variables
_SCALARS = (
    "sigma2",
    "count",
    "lb",
    "eps_hat",
    "t_hat",
    "loss_star",
    "f_x",
    "f_x_prime",
    "sigma_hat",
    "c_n",
    "bandwidth",
    "floor_driven",
    "edge",
    "sparse_support",
    "epsilon_c",
)
_PER_PAIR = ("eps_hat_pair", "t_hat_pair", "bandwidth_x", "bandwidth_x_prime")
_PER_EPS = ("delta_hat", "delta_lb", "delta_exact")


_FDP_POINTS = ("fdp_alpha_upper", "fdp_beta_upper", "fdp_alpha_hat", "fdp_beta_hat")


def fdp_vars(
    results: list[dict[str, Any]], accounting: xr.Dataset | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``mpl`` group's f-DP variables and coordinates: the empirical points (NaN-padded along
    ``fdp_point``), μ lower bound, and — for the levels the ``accounting`` group holds — its
    certified and Bureau-implied curves and the gap (:func:`auditlib.mpl.fdp_gap.fdp_gap`)."""
    if not results or "fdp_alpha_upper" not in results[0]:
        return {}, {}
    gl, fp = S.GEOLEVEL, S.FDP_POINT
    ng, k = len(results), max(len(r["fdp_alpha_upper"]) for r in results)
    data: dict[str, Any] = {}
    for name in _FDP_POINTS:
        a = np.full((ng, k), np.nan)
        for i, r in enumerate(results):
            a[i, : len(r[name])] = r[name]
        data[name] = ((gl, fp), a)
    data["fdp_mu_lower"] = ((gl,), np.array([r["fdp_mu_lower"] for r in results], dtype=float))
    coords: dict[str, Any] = {fp: np.arange(k)}
    if (
        accounting is None
        or "tradeoff_exact_lower" not in accounting
        or gl not in accounting.coords
    ):
        data["fdp_gap"] = ((gl,), np.full(ng, np.nan))
        return data, coords
    grid = np.asarray(accounting[S.ALPHA].values, dtype=float)
    held = [str(g) for g in accounting[gl].values]
    exact, bureau, gap = np.full((ng, grid.size), np.nan), np.full((ng, grid.size), np.nan), []
    for i, r in enumerate(results):
        if r["geolevel"] not in held:
            gap.append(np.nan)
            continue
        j = held.index(r["geolevel"])
        exact[i] = accounting["tradeoff_exact_lower"].values[j]
        if "tradeoff_bureau" in accounting:
            bureau[i] = accounting["tradeoff_bureau"].values[j]
        gap.append(fdp_gap(r["fdp_alpha_upper"], r["fdp_beta_upper"], grid, exact[i]))
    data["fdp_exact_lower"] = ((gl, S.ALPHA), exact)
    data["fdp_bureau"] = ((gl, S.ALPHA), bureau)
    data["fdp_gap"] = ((gl,), np.array(gap, dtype=float))
    coords[S.ALPHA] = grid
    return data, coords


def written_accounting(store: ResultStore) -> xr.Dataset | None:
    """The ``accounting`` group of an unfinished store if written whole (a resumed run), else None."""
    if not store.group_complete(S.ACCOUNTING):
        return None
    return store.dataset(S.ACCOUNTING, consolidated=False).load()


def mpl_dataset(
    results: list[dict[str, Any]], spec: AuditSpec, accounting: xr.Dataset | None = None
) -> xr.Dataset:
    """The audit store's ``mpl`` group from the per-geolevel results (curves NaN-padded); with
    ``[mpl] fdp`` also the f-DP points, beside ``accounting``'s certified curves (:func:`fdp_vars`)."""
    m = spec.mpl
    gl, pr, pt, me = S.GEOLEVEL, S.MPL_PAIR, S.POINT, S.MPL_EPS
    npts = max(len(r["loss_t"]) for r in results)
    ng, nb = len(results), len(m.pairs)
    loss_t = np.full((ng, npts), np.nan)
    curve = np.full((ng, nb, npts), np.nan)
    for i, r in enumerate(results):
        k = len(r["loss_t"])
        loss_t[i, :k] = r["loss_t"]
        curve[i, :, :k] = r["loss_curve"]
    data: dict[str, Any] = {k: ((gl,), np.array([r[k] for r in results])) for k in _SCALARS}
    data["query"] = ((gl,), np.array([r["name"] for r in results], dtype=object))
    data["best_pair"] = ((gl,), np.array([m.pairs[r["best_pair"]] for r in results], dtype=object))
    data.update({k: ((gl, pr), np.array([r[k] for r in results])) for k in _PER_PAIR})
    data.update({k: ((gl, me), np.array([r[k] for r in results])) for k in _PER_EPS})
    data["loss_t"] = ((gl, pt), loss_t)
    data["loss_curve"] = ((gl, pr, pt), curve)
    fdp_data, fdp_coords = fdp_vars(results, accounting)
    data.update(fdp_data)
    return xr.Dataset(
        data,
        coords={
            gl: np.array([r["geolevel"] for r in results], dtype=object),
            pr: np.array(m.pairs, dtype=object),
            pt: np.arange(npts),
            me: np.array(m.delta_epsilons, dtype=float),
            **fdp_coords,
        },
        attrs={
            "method": "MPL (Askin, Kutta & Dette 2022, Algorithm 4) on one released cell count "
            "per geolevel, D vs D' (one person added / removed / moved); TDDE with floor tau",
            "alpha": m.alpha,
            "n": m.n,
            "n_confidence": m.n_confidence,
            "tau": m.tau,
            "radius_sd": m.radius_sd,
            "neighbours": spec.audit.neighbours,
            "release": spec.release.kind,
            "postprocess": spec.simulation.postprocess,
            "lb": "lower confidence bound on epsilon_c (asymptotic level 1 - alpha); LB > a claimed "
            "epsilon refutes the claim, LB <= it proves nothing; the raw estimate, which may be "
            "< 0: a bound <= 0 is vacuous (epsilon >= 0 always), shown as 0 (vacuous)",
            "delta_lb": "finite-sample lower confidence bound on the hockey-stick delta(eps) of the "
            "best pair (Clopper-Pearson, level 1 - alpha per eps); delta_hat: plug-in (errs up)",
            **(
                {
                    "fdp": "empirical f-DP points of the best pair's count: with probability >= "
                    "1 - alpha every (fdp_alpha_upper, fdp_beta_upper) lies on or above its "
                    "trade-off curve (err high); fdp_mu_lower errs low; fdp_gap = largest "
                    "fdp_beta_upper - fdp_exact_lower (right step) at fdp_alpha_upper, errs high, "
                    "near 0: the accounting is tight"
                }
                if fdp_data
                else {}
            ),
        },
    )
