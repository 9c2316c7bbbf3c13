"""DP counts made by third-party libraries (OpenDP, IBM diffprivlib), audited by dpaudit.

Needs the ``clients`` extra (``pip install -e ".[clients,examples]"``). From the repository root:

    python examples/clients.py                        # OpenDP's count at epsilon = 1, 20 runs
    python examples/clients.py --mechanism diffprivlib-laplace --claim 0.5   # a mis-declared claim
    python examples/clients.py --power 10             # how often a half-epsilon claim is flagged

The true table is plotnine's ``midwest`` (1990 counts of 437 counties in 5 states); the count is
``popamerindian``. Each published run is one library mechanism applied to every county's count:

* ``opendp-count``: OpenDP's ``make_count`` of the county's person records, then ``then_laplace``
  (on integers: the discrete Laplace, i.e. two-sided geometric, noise); claims ``map(1)`` = ε.
* ``opendp-geometric``: OpenDP's ``make_laplace`` on an integer vector (discrete Laplace); ε.
* ``opendp-gaussian``: OpenDP's ``make_gaussian`` on integers (discrete Gaussian); claims ρ-zCDP.
* ``diffprivlib-laplace``, ``diffprivlib-geometric``: ``Laplace`` / ``Geometric`` with ε.
* ``diffprivlib-gaussian``: ``GaussianAnalytic`` with (ε, δ = 1e-5).

The runs are written beside the truth (one column per run) with a spec ``release.kind =
"observed"``, and ``dpaudit run`` audits them as released: EPL per level with its interval. The
same mechanisms also go to :func:`auditlib.mpl.mpl` as black boxes (the library's own sampler on
two neighbouring counts) for a lower confidence bound on their ε, and to dpaudit's exact
accountant for their ε(δ). A claim is flagged when the MPL lower bound or the EPL interval lies
above it. diffprivlib takes a seeded ``random_state``; OpenDP draws from the operating system's
generator by design and cannot be seeded (its checks run at a small α: a false flag has
probability at most α).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: the real table: plotnine's midwest, counties under states; the count audited
COUNT = "popamerindian"
GAUSSIAN_DELTA = 1e-5
#: level of the example's MPL bounds: a true claim is wrongly flagged with probability <= ALPHA
ALPHA = 1e-3


def midwest_truth() -> pd.DataFrame:
    from plotnine.data import midwest

    return midwest[["state", "county", COUNT]].reset_index(drop=True)


@dataclass(frozen=True)
class LibraryMechanism:
    """One library's mechanism on a count: ``publish(counts, rng)`` releases every count once;
    ``claimed`` is the library's own statement (ε, or ρ for zCDP, or (ε, δ)); ``integer``
    whether it publishes whole numbers; ``loss`` dpaudit's accountant component of it."""

    name: str
    publish: Callable[[np.ndarray, np.random.Generator], np.ndarray]
    claimed: dict[str, float]
    integer: bool
    loss: Any

    @property
    def epsilon(self) -> float:
        """The ε the library claims (pure ε-DP, or the ε of its (ε, δ))."""
        return self.claimed["epsilon"]


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
    return LibraryMechanism("opendp-count", publish, {"epsilon": claim}, True, GeometricLoss(claim))


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
        "opendp-geometric", publish, {"epsilon": claim}, True, GeometricLoss(claim)
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
    return LibraryMechanism(
        "opendp-gaussian", publish, claimed, True, DiscreteGaussianLoss(sigma**2)
    )


def diffprivlib_laplace(epsilon: float) -> LibraryMechanism:
    from diffprivlib.mechanisms import Laplace

    from auditlib.accounting import LaplaceLoss

    def publish(counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        m = Laplace(epsilon=epsilon, sensitivity=1, random_state=_state(rng))
        return np.array([m.randomise(float(c)) for c in counts])

    return LibraryMechanism(
        "diffprivlib-laplace", publish, {"epsilon": epsilon}, False, LaplaceLoss(1.0 / epsilon)
    )


def diffprivlib_geometric(epsilon: float) -> LibraryMechanism:
    from diffprivlib.mechanisms import Geometric

    from auditlib.accounting import GeometricLoss

    def publish(counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        m = Geometric(epsilon=epsilon, sensitivity=1, random_state=_state(rng))
        return np.array([m.randomise(int(c)) for c in counts], dtype=np.int64)

    return LibraryMechanism(
        "diffprivlib-geometric", publish, {"epsilon": epsilon}, True, GeometricLoss(epsilon)
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
    return LibraryMechanism("diffprivlib-gaussian", publish, claimed, False, GaussianLoss(sigma))


def _state(rng: np.random.Generator) -> np.random.RandomState:
    return np.random.RandomState(int(rng.integers(2**31)))


#: name -> the mechanism at a given ε (opendp-gaussian: σ = 2/ε, a ρ comparable with ε)
MECHANISMS: dict[str, Callable[[float], LibraryMechanism]] = {
    "opendp-count": opendp_count,
    "opendp-geometric": opendp_geometric,
    "opendp-gaussian": lambda eps: opendp_gaussian(2.0 / eps),
    "diffprivlib-laplace": diffprivlib_laplace,
    "diffprivlib-geometric": diffprivlib_geometric,
    "diffprivlib-gaussian": diffprivlib_gaussian,
}


def published_table(mech: LibraryMechanism, runs: int, seed: int) -> pd.DataFrame:
    """The truth and ``runs`` published runs of ``mech`` (columns ``dp0``, ``dp1``, …)."""
    df = midwest_truth()
    rng = np.random.default_rng(seed)
    counts = df[COUNT].to_numpy()
    for r in range(runs):
        df[f"dp{r}"] = mech.publish(counts, rng)
    return df


def write_observed(
    mech: LibraryMechanism,
    runs: int,
    seed: int,
    directory: Path,
    *,
    confidence: float = 0.9,
    n_boot: int = 200,
) -> tuple[Path, pd.DataFrame]:
    """Write the published table and an observed-release spec beside it (EPL intervals at
    ``confidence`` from ``n_boot`` resamples); return the spec and the table."""
    directory.mkdir(parents=True, exist_ok=True)
    df = published_table(mech, runs, seed)
    df.to_csv(directory / "published.csv", index=False)
    cols = ", ".join(f'["dp{r}"]' for r in range(runs))
    spec = directory / "observed.toml"
    spec.write_text(
        f'[audit]\nname = "{mech.name}"\nseed = {seed}\n'
        f'[population]\nkind = "table"\npath = "published.csv"\ncounts = ["{COUNT}"]\n'
        'levels = ["state"]\nunit = "county"\n'
        f'[release]\nkind = "observed"\npublished = [{cols}]\n'
        f"published_integer = {'true' if mech.integer else 'false'}\n"
        "[accounting]\ndeltas = [1e-10]\ncomposed = false\neps_grid_points = 20\n"
        f"[epl]\nconfidence = {confidence}\nn_boot = {n_boot}\n"
    )
    return spec, df


def black_box(mech: LibraryMechanism, kind: str) -> Any:
    """The library mechanism as :class:`auditlib.mpl.protocol.MechanismUnderTest`: ``n`` releases
    of the count ``x`` by the library itself."""
    from auditlib.mpl.protocol import MechanismUnderTest

    def sampler(x: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        out = mech.publish(np.full(n, int(x)), rng)
        return out.astype(np.int64 if kind == "discrete" else np.float64)

    return MechanismUnderTest(mech.name, sampler, kind)  # type: ignore[arg-type]


def mpl_bound(
    mech: LibraryMechanism,
    seed: int,
    *,
    alpha: float = 0.05,
    n: int = 20_000,
    delta_epsilons: tuple[float, ...] | None = None,
) -> Any:
    """MPL lower confidence bound (level 1 − ``alpha``) on the ε of ``mech`` from its own draws:
    counts 10 vs 11 and 10 vs 9 (one person added, removed), region the outputs 8..12 (within
    about two noise scales at ε = 1, where every output is seen often); with ``delta_epsilons``
    also the hockey-stick δ(ε) lower bounds of (ε, δ) claims."""
    from auditlib.mpl.dpl import Region
    from auditlib.mpl.mpl import mpl

    kind = "discrete" if mech.integer else "continuous"
    region: Any = np.arange(8, 13) if kind == "discrete" else Region.interval(8.0, 12.0)
    return mpl(
        black_box(mech, kind),
        [(10, 11), (10, 9)],
        n=n,
        n_confidence=max(50_000, n),
        region=region,
        rng=np.random.default_rng(seed),
        alpha=alpha,
        delta_epsilons=delta_epsilons,
    )


def exact_epsilon(mech: LibraryMechanism, delta: float) -> Any:
    """dpaudit's certified ε(δ) bracket of one release of ``mech``."""
    from auditlib.accounting import PrivacyLossComposition

    return PrivacyLossComposition([mech.loss]).epsilon(delta)


def dpaudit_run(spec: Path, store: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``dpaudit run SPEC --store STORE`` as a user runs it."""
    exe = Path(sys.executable).with_name("dpaudit")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "flows.cli"]
    cmd += ["run", str(spec), "--store", str(store), "--overwrite", *extra]
    return subprocess.run(cmd, cwd=spec.parent, capture_output=True, text=True, timeout=1800)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mechanism", choices=sorted(MECHANISMS), default="opendp-count")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument(
        "--claim", type=float, default=None, help="the ε to check (default: the library's)"
    )
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1990)
    ap.add_argument("--out", type=Path, default=Path("results/clients"))
    ap.add_argument(
        "--power", type=int, default=0, help="MPL repetitions for the power of a half claim"
    )
    args = ap.parse_args(argv)
    mech = MECHANISMS[args.mechanism](args.epsilon)
    claim = args.claim if args.claim is not None else mech.epsilon
    print(f"{mech.name}: the library claims {mech.claimed}; checked claim: epsilon = {claim:g}")
    delta = mech.claimed.get("delta", 1e-10)
    b = exact_epsilon(mech, delta)
    print(f"exact epsilon(delta={delta:g}) of one release: [{b.lower:.6f}, {b.upper:.6f}]")
    r = mpl_bound(mech, args.seed, alpha=ALPHA)
    flag = "FLAGGED" if r.lb > claim else "consistent"
    from flows.report.mpl_bound import VACUOUS, vacuous

    lb = VACUOUS if vacuous(r.lb) else f"{r.lb:.4f}"  # a bound <= 0 says nothing (eps >= 0)
    print(f"MPL lower bound ({100 * (1 - ALPHA):g} %): {lb} -> {flag}")
    if args.power:
        flagged = sum(
            mpl_bound(mech, args.seed + k, alpha=ALPHA).lb > mech.epsilon / 2
            for k in range(args.power)
        )
        print(f"power: a claim of epsilon/2 flagged by MPL in {flagged} of {args.power} seeds")
    spec, _ = write_observed(mech, args.runs, args.seed, args.out)
    done = dpaudit_run(spec, args.out / "audit.zarr")
    print(done.stdout or done.stderr)
    import xarray as xr

    epl = xr.open_zarr(args.out / "audit.zarr", group="epl").sel(geolevel="county", query="total")
    lo, hi = float(epl.epl_ci_low), float(epl.epl_ci_high)
    flag = "FLAGGED" if lo > claim else "consistent"
    print(f"EPL at county level: {float(epl.epl_bias_aware):.4f} [{lo:.4f}, {hi:.4f}] -> {flag}")


if __name__ == "__main__":
    main()
