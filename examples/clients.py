"""DP counts made by third-party libraries (OpenDP, IBM diffprivlib, Tumult Analytics), audited by
dpaudit.

Needs the ``clients`` extra (``pip install -e ".[clients,examples]"``). From the repository root:

    python examples/clients.py                        # OpenDP's count at epsilon = 1, 20 runs
    python examples/clients.py --mechanism diffprivlib-laplace --claim 0.5   # a mis-declared claim
    python examples/clients.py --mechanism tumult-count   # Tumult Analytics, in its own venv

The true table is plotnine's ``midwest`` (1990 counts of 437 counties in 5 states); the count is
``popamerindian``. Each published run is one library mechanism applied to every county's count:

* ``opendp-count``: OpenDP's ``make_count`` of the county's person records, then ``then_laplace``
  (on integers: the discrete Laplace, i.e. two-sided geometric, noise); claims ``map(1)`` = ε.
* ``opendp-geometric``: OpenDP's ``make_laplace`` on an integer vector (discrete Laplace); ε.
* ``opendp-gaussian``: OpenDP's ``make_gaussian`` on integers (discrete Gaussian); claims ρ-zCDP.
* ``diffprivlib-laplace``, ``diffprivlib-geometric``: ``Laplace`` / ``Geometric`` with ε.
* ``diffprivlib-gaussian``: ``GaussianAnalytic`` with (ε, δ = 1e-5).
* ``tumult-count``: Tumult Analytics' count of person rows grouped by county in a ``Session`` with
  a pure-DP budget of ε per run (two-sided geometric noise of scale 1/ε; ``tumult_count(ε,
  zcdp=True)``: the same under ρ-zCDP with ρ = ε²/8, discrete Gaussian noise of σ = 2/ε). Tumult
  pins an older numpy and pandas, so it runs in its own environment, ``.venv-tumult`` at the
  repository root (another one with ``DPAUDIT_TUMULT_VENV``): made on first use from
  ``examples/tumult-requirements.txt`` (about 1 GB with pyspark; Spark needs a Java 17 runtime),
  and ``examples/tumult_client.py`` is run by its interpreter (``PYSPARK_PYTHON``).

The runs are written beside the truth (one column per run) with a spec ``release.kind =
"observed"`` and an allocation file (``allocation.csv``) declaring the claimed noise: the one row of
the county counts, its mechanism and noise scale for the claimed ε (``--claim``, by default the
library's own), e.g. ``County,total,1,geometric,,,1,,add_remove`` for a geometric of scale 1/ε at
ε = 1. ``dpaudit run`` audits them as released: EPL per level with its interval, the declared
mechanism's exact ε in its accounting. The same mechanisms also go to :func:`auditlib.mpl.mpl` as
black boxes (the library's own sampler on two neighbouring counts) for a lower confidence bound on
their ε, and to dpaudit's exact accountant for their ε(δ). The audit's claim verdict
(``consistent``, ``refuted`` or ``undecided``: docs/epl.md, "The claim verdict") tests the
declared noise on the residuals; the MPL bound flags a claim it lies above. diffprivlib takes a seeded ``random_state``; OpenDP and
Tumult draw from the operating system's generator by design and cannot be seeded (the checks run
at a small α: a false flag has probability at most α). Tumult's MPL is not run: each of its draws
is a Spark job.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

# its sibling modules (however it is loaded), their functions part of this example's API
sys.path.insert(0, str(Path(__file__).resolve().parent))
from library_audit import black_box, declared_epsilon, dpaudit_run, exact_epsilon, mpl_bound  # noqa: F401
from tumult_host import run_tumult, tumult_python, tumult_venv  # noqa: F401

#: the real table: plotnine's midwest, counties under states; the count audited
COUNT = "popamerindian"
GAUSSIAN_DELTA = 1e-5
#: the δ of the exact ε of the pure-DP mechanisms (their ε(δ) is ε itself to many digits)
PURE_DELTA = 1e-10
#: level of the example's MPL bounds: a true claim is wrongly flagged with probability <= ALPHA
ALPHA = 1e-3
#: the allocation geolevel of the published counts, measured at the table's unit (county)
GEOLEVEL = "County"
UNIT = "county"
#: the repository this example lives in; Tumult's own environment and its requirements

#: one allocation-file row's noise: (mechanism, noise column, value), e.g. geometric, scale, 1
Declared = tuple[str, str, Fraction]


def midwest_truth() -> pd.DataFrame:
    from plotnine.data import midwest

    return midwest[["state", "county", COUNT]].reset_index(drop=True)


@dataclass(frozen=True)
class LibraryMechanism:
    """One library's mechanism on a count: ``publish(counts, rng)`` releases every count once;
    ``claimed`` is the library's own statement (ε, or ρ for zCDP, or (ε, δ)); ``integer``
    whether it publishes whole numbers; ``loss`` dpaudit's accountant component of it;
    ``declare(ε)`` the allocation-file noise of a claim of ε in the library's own terms (its
    noise scale for ε; ``declare(self.epsilon)`` is the mechanism itself). A library that
    publishes all runs at once (one session) has ``publish_runs(truth, runs, workdir)`` instead
    of ``publish``, and no black box for MPL."""

    name: str
    publish: Callable[[np.ndarray, np.random.Generator], np.ndarray] | None
    claimed: dict[str, float]
    integer: bool
    loss: Any
    declare: Callable[[float], Declared]
    publish_runs: Callable[[pd.DataFrame, int, Path], pd.DataFrame] | None = None

    @property
    def epsilon(self) -> float:
        """The ε the library claims (pure ε-DP, or the ε of its (ε, δ))."""
        return self.claimed["epsilon"]

    @property
    def delta(self) -> float:
        """The δ of the claim (pure ε-DP: the tiny δ its exact ε is given at)."""
        return self.claimed.get("delta", PURE_DELTA)


def _exact(x: float) -> Fraction:
    """A float as the decimal it is written as (0.1 -> 1/10): 1/ε of ε = 0.3 is 10/3."""
    return Fraction(repr(float(x)))


def _text(value: Fraction) -> str:
    """A noise value as the file gives it: the float's shortest decimal when it is one (1,
    0.5, 3.7306316348148236), else the exact fraction (10/3)."""
    decimal = float(value)
    if _exact(decimal) == value:
        return str(int(decimal)) if decimal.is_integer() else repr(decimal)
    return str(value)


def declare_geometric(epsilon: float) -> Declared:
    """Two-sided geometric noise of ε-DP (sensitivity 1): scale b = 1/ε, P(k) ∝ e^(−|k|/b)."""
    return ("geometric", "scale", 1 / _exact(epsilon))


def declare_laplace(epsilon: float) -> Declared:
    """Laplace noise of ε-DP (sensitivity 1): scale b = 1/ε."""
    return ("laplace", "scale", 1 / _exact(epsilon))


def zcdp_rho(epsilon: float, delta: float = GAUSSIAN_DELTA) -> float:
    """The ρ whose (ε, δ) conversion ρ + 2√(ρ ln 1/δ) is ``epsilon``."""
    log = np.log(1 / delta)
    return float((np.sqrt(log + epsilon) - np.sqrt(log)) ** 2)


def declare_zcdp(epsilon: float) -> Declared:
    """Discrete Gaussian noise claimed as ρ-zCDP, the ρ whose (ε, δ = 1e-5) is ``epsilon``."""
    return ("discrete_gaussian", "rho", _exact(zcdp_rho(epsilon)))


def declare_analytic(epsilon: float) -> Declared:
    """diffprivlib's analytic Gaussian: the σ it calibrates for (ε, δ = 1e-5)."""
    from diffprivlib.mechanisms import GaussianAnalytic

    probe = GaussianAnalytic(epsilon=epsilon, delta=GAUSSIAN_DELTA, sensitivity=1)
    return ("gaussian", "sigma", _exact(probe._scale))


def _opendp() -> Any:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp


def opendp_count(epsilon: float) -> LibraryMechanism:
    """OpenDP: count the records (one per person), then discrete Laplace noise of scale 1/ε."""
    from auditlib.accounting import GeometricLoss

    dp = _opendp()
    meas = dp.t.make_count(
        dp.vector_domain(dp.atom_domain(T=int)), dp.symmetric_distance()
    ) >> dp.m.then_laplace(scale=1.0 / epsilon)

    def publish(counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.array([meas([0] * int(c)) for c in counts], dtype=np.int64)

    claim = float(meas.map(1))  # one person added or removed: symmetric distance 1
    return LibraryMechanism(
        "opendp-count", publish, {"epsilon": claim}, True, GeometricLoss(claim), declare_geometric
    )


def opendp_geometric(epsilon: float) -> LibraryMechanism:
    """OpenDP: discrete Laplace (two-sided geometric) noise on an integer vector of counts."""
    from auditlib.accounting import GeometricLoss

    dp = _opendp()
    meas = dp.m.make_laplace(
        dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int), scale=1.0 / epsilon
    )

    def publish(counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.asarray(meas([int(c) for c in counts]), dtype=np.int64)

    claim = float(meas.map(1))
    return LibraryMechanism(
        "opendp-geometric",
        publish,
        {"epsilon": claim},
        True,
        GeometricLoss(claim),
        declare_geometric,
    )


def opendp_gaussian(sigma: float) -> LibraryMechanism:
    """OpenDP: discrete Gaussian noise of scale σ on integers; claims ρ-zCDP (ρ = 1/(2σ²)), whose
    ε at δ is the conversion ρ + 2√(ρ ln 1/δ)."""
    from auditlib.accounting import DiscreteGaussianLoss

    dp = _opendp()
    meas = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int), scale=sigma
    )

    def publish(counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.asarray(meas([int(c) for c in counts]), dtype=np.int64)

    rho = float(meas.map(1))
    eps = rho + 2 * np.sqrt(rho * np.log(1 / GAUSSIAN_DELTA))
    claimed = {"rho": rho, "epsilon": float(eps), "delta": GAUSSIAN_DELTA}

    def declare(epsilon: float) -> Declared:
        if epsilon == claimed["epsilon"]:  # the library's own σ, exactly
            return ("discrete_gaussian", "sigma2", _exact(sigma) ** 2)
        return declare_zcdp(epsilon)

    return LibraryMechanism(
        "opendp-gaussian", publish, claimed, True, DiscreteGaussianLoss(sigma**2), declare
    )


def diffprivlib_laplace(epsilon: float) -> LibraryMechanism:
    from diffprivlib.mechanisms import Laplace

    from auditlib.accounting import LaplaceLoss

    def publish(counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        m = Laplace(epsilon=epsilon, sensitivity=1, random_state=_state(rng))
        return np.array([m.randomise(float(c)) for c in counts])

    return LibraryMechanism(
        "diffprivlib-laplace",
        publish,
        {"epsilon": epsilon},
        False,
        LaplaceLoss(1.0 / epsilon),
        declare_laplace,
    )


def diffprivlib_geometric(epsilon: float) -> LibraryMechanism:
    from diffprivlib.mechanisms import Geometric

    from auditlib.accounting import GeometricLoss

    def publish(counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        m = Geometric(epsilon=epsilon, sensitivity=1, random_state=_state(rng))
        return np.array([m.randomise(int(c)) for c in counts], dtype=np.int64)

    return LibraryMechanism(
        "diffprivlib-geometric",
        publish,
        {"epsilon": epsilon},
        True,
        GeometricLoss(epsilon),
        declare_geometric,
    )


def diffprivlib_gaussian(epsilon: float) -> LibraryMechanism:
    from diffprivlib.mechanisms import GaussianAnalytic

    from auditlib.accounting import GaussianLoss

    probe = GaussianAnalytic(epsilon=epsilon, delta=GAUSSIAN_DELTA, sensitivity=1)
    sigma = float(probe._scale)  # the σ the library calibrated for (ε, δ)

    def publish(counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        m = GaussianAnalytic(
            epsilon=epsilon, delta=GAUSSIAN_DELTA, sensitivity=1, random_state=_state(rng)
        )
        return np.array([m.randomise(float(c)) for c in counts])

    claimed = {"epsilon": epsilon, "delta": GAUSSIAN_DELTA, "sigma": sigma}
    return LibraryMechanism(
        "diffprivlib-gaussian", publish, claimed, False, GaussianLoss(sigma), declare_analytic
    )


def _state(rng: np.random.Generator) -> np.random.RandomState:
    return np.random.RandomState(int(rng.integers(2**31)))


def tumult_count(epsilon: float, *, zcdp: bool = False) -> LibraryMechanism:
    """Tumult Analytics: a per-county count of person rows (``AddOneRow``), each run with a
    pure-DP budget of ε (documented noise: two-sided geometric of scale 1/ε), or with ``zcdp``
    a ρ-zCDP budget of ρ = ε²/8 (discrete Gaussian, σ² = 1/(2ρ)). What Tumult reports of its
    noise must be that, or the run fails."""
    from auditlib.accounting import DiscreteGaussianLoss, GeometricLoss

    if zcdp:
        rho = epsilon**2 / 8
        sigma2 = 1 / (2 * _exact(rho))
        eps = rho + 2 * np.sqrt(rho * np.log(1 / GAUSSIAN_DELTA))
        claimed = {"rho": rho, "epsilon": float(eps), "delta": GAUSSIAN_DELTA}
        budget, noise = {"rho": rho}, ("discrete_gaussian", float(sigma2))
        loss: Any = DiscreteGaussianLoss(sigma2)

        def declare(e: float) -> Declared:
            if e == claimed["epsilon"]:
                return ("discrete_gaussian", "sigma2", sigma2)
            return declare_zcdp(e)

    else:
        claimed = {"epsilon": epsilon}
        budget, noise = {"epsilon": epsilon}, ("geometric", float(1 / _exact(epsilon)))
        loss, declare = GeometricLoss(epsilon), declare_geometric

    name = "tumult-count-zcdp" if zcdp else "tumult-count"

    def publish_runs(truth: pd.DataFrame, runs: int, workdir: Path) -> pd.DataFrame:
        df, info = run_tumult(truth, runs, workdir, budget, COUNT)
        reported = [(n["mechanism"], n["parameter"]) for n in info["noise"]]
        if len(reported) != 1 or reported[0][0] != noise[0]:
            raise RuntimeError(f"{name}: Tumult reports the noise {reported}, not {noise}")
        if not np.isclose(reported[0][1], noise[1], rtol=1e-9):
            raise RuntimeError(f"{name}: Tumult reports the noise {reported}, not {noise}")
        print(
            f"{name}: {info['library']}, noise {reported[0][0]} {reported[0][1]:g}; "
            f"{runs} runs in {info['seconds_runs']:g} s after {info['seconds_setup']:g} s"
        )
        return df

    return LibraryMechanism(name, None, claimed, True, loss, declare, publish_runs)


#: name -> the mechanism at a given ε (the Gaussians on integers: σ = 2/ε, a ρ comparable with ε)
MECHANISMS: dict[str, Callable[[float], LibraryMechanism]] = {
    "opendp-count": opendp_count,
    "opendp-geometric": opendp_geometric,
    "opendp-gaussian": lambda eps: opendp_gaussian(2.0 / eps),
    "diffprivlib-laplace": diffprivlib_laplace,
    "diffprivlib-geometric": diffprivlib_geometric,
    "diffprivlib-gaussian": diffprivlib_gaussian,
    "tumult-count": tumult_count,
}


def published_table(
    mech: LibraryMechanism, runs: int, seed: int, workdir: Path | None = None
) -> pd.DataFrame:
    """The truth and ``runs`` published runs of ``mech`` (columns ``dp0``, ``dp1``, …); a library
    publishing all runs at once works in ``workdir``."""
    df = midwest_truth()
    if mech.publish_runs is not None:
        if workdir is None:
            raise ValueError(f"{mech.name} publishes through files: give a workdir")
        got = mech.publish_runs(df, runs, workdir)
        merged = df.merge(got, on=["state", "county"], how="left", suffixes=("", "_tumult"))
        if not (merged[f"{COUNT}_tumult"] == merged[COUNT]).all():
            raise RuntimeError(f"{mech.name}: the published table's truth is not the midwest's")
        return merged[[*df.columns, *(f"dp{r}" for r in range(runs))]]
    assert mech.publish is not None
    rng = np.random.default_rng(seed)
    counts = df[COUNT].to_numpy()
    for r in range(runs):
        df[f"dp{r}"] = mech.publish(counts, rng)
    return df


def allocation_csv(mech: LibraryMechanism, claim: float | None = None) -> str:
    """The allocation file declaring ``mech`` at ``claim`` (default: the library's own ε): one row,
    the county counts' total, with the claim's mechanism and noise."""
    from auditlib.allocation_file import format_csv

    mechanism, column, value = mech.declare(mech.epsilon if claim is None else claim)
    row = {
        "geolevel": GEOLEVEL,
        "query": "total",
        "cells": 1,
        "mechanism": mechanism,
        column: _text(value),
        "neighbours": "add_remove",
    }
    return format_csv([row])


def write_observed(
    mech: LibraryMechanism,
    runs: int,
    seed: int,
    directory: Path,
    *,
    claim: float | None = None,
    confidence: float = 0.9,
    n_boot: int = 200,
) -> tuple[Path, pd.DataFrame]:
    """Write the published table, the allocation file declaring ``claim`` (default: the
    library's ε) and an observed-release spec beside them (EPL intervals at ``confidence`` from
    ``n_boot`` resamples, exact ε at the claim's δ); return the spec and the table."""
    directory.mkdir(parents=True, exist_ok=True)
    df = published_table(mech, runs, seed, directory)
    df.to_csv(directory / "published.csv", index=False)
    (directory / "allocation.csv").write_text(allocation_csv(mech, claim))
    cols = ", ".join(f'["dp{r}"]' for r in range(runs))
    spec = directory / "observed.toml"
    spec.write_text(
        f'[audit]\nname = "{mech.name}"\nseed = {seed}\nallocation = "allocation.csv"\n'
        f'[population]\nkind = "table"\npath = "published.csv"\ncounts = ["{COUNT}"]\n'
        f'levels = ["state"]\nunit = "{UNIT}"\n'
        f'[release]\nkind = "observed"\nlevels = {{ {GEOLEVEL} = "{UNIT}" }}\n'
        f"published = [{cols}]\n"
        f"published_integer = {'true' if mech.integer else 'false'}\n"
        f"[accounting]\ndeltas = [{mech.delta!r}]\ncomposed = false\neps_grid_points = 20\n"
        f"[epl]\nconfidence = {confidence}\nn_boot = {n_boot}\n"
    )
    return spec, df


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--mechanism", choices=sorted(MECHANISMS), default="opendp-count")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument(
        "--claim",
        type=float,
        default=None,
        help="the ε claimed, checked and declared in the allocation file (default: the library's)",
    )
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1990)
    ap.add_argument("--out", type=Path, default=Path("results/clients"))
    args = ap.parse_args(argv)
    mech = MECHANISMS[args.mechanism](args.epsilon)
    claim = args.claim if args.claim is not None else mech.epsilon
    print(f"{mech.name}: the library claims {mech.claimed}; checked claim: epsilon = {claim:g}")
    delta = mech.delta
    b = exact_epsilon(mech, delta)
    print(f"exact epsilon(delta={delta:g}) of one release: [{b.lower:.6f}, {b.upper:.6f}]")
    if mech.publish is not None:
        r = mpl_bound(mech, args.seed, alpha=ALPHA)
        flag = "FLAGGED" if r.lb > claim else "consistent"
        from flows.report.mpl_bound import VACUOUS, vacuous

        lb = VACUOUS if vacuous(r.lb) else f"{r.lb:.4f}"  # a bound <= 0 says nothing (eps >= 0)
        print(f"MPL lower bound ({100 * (1 - ALPHA):g} %): {lb} -> {flag}")
    else:
        print("MPL lower bound: not run (each draw of this library is a Spark job)")
    spec, _ = write_observed(mech, args.runs, args.seed, args.out, claim=args.claim)
    store = args.out / "audit.zarr"
    done = dpaudit_run(spec, store)
    print(done.stdout)
    if done.returncode != 0:
        print(done.stderr, file=sys.stderr)
        raise SystemExit(f"dpaudit run {spec} failed (exit {done.returncode})")
    import xarray as xr

    mechanism, column, value = mech.declare(claim)
    declared = declared_epsilon(store, delta, GEOLEVEL)
    print(
        f"declared in {spec.with_name('allocation.csv')}: {mechanism} {column} = {value} "
        f"-> exact epsilon(delta={delta:g}) {declared:.6f} in the store's accounting"
    )
    epl = xr.open_zarr(store, group="epl").sel(geolevel=UNIT, query="total")
    lo, hi = float(epl.epl_ci_low), float(epl.epl_ci_high)
    print(f"EPL at county level: {float(epl.epl_bias_aware):.4f} [{lo:.4f}, {hi:.4f}]")
    claims = xr.open_zarr(store, group="claims").sel(geolevel=GEOLEVEL)
    print(f"claim verdict at {GEOLEVEL}: {claims.claim_sentence.values}")


if __name__ == "__main__":
    main()
