"""A third-party library's mechanism audited by dpaudit (``examples/clients.py``): the library as a
black box of the MPL lower bound, dpaudit's certified ε(δ) of one release, ``dpaudit run`` as a user
runs it, and the declared allocation's ε read back from the store."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np


def black_box(mech: Any, kind: str) -> Any:
    """The library mechanism as :class:`auditlib.mpl.protocol.MechanismUnderTest`: ``n`` releases
    of the count ``x`` by the library itself."""
    from auditlib.mpl.protocol import MechanismUnderTest

    publish = mech.publish
    if publish is None:
        raise ValueError(f"{mech.name} publishes whole tables only: no black box")

    def sampler(x: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        out = publish(np.full(n, int(x)), rng)
        return out.astype(np.int64 if kind == "discrete" else np.float64)

    return MechanismUnderTest(mech.name, sampler, kind)  # type: ignore[arg-type]


def mpl_bound(
    mech: Any,
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


def exact_epsilon(mech: Any, delta: float) -> Any:
    """dpaudit's certified ε(δ) bracket of one release of ``mech``."""
    from auditlib.accounting import PrivacyLossComposition

    return PrivacyLossComposition([mech.loss]).epsilon(delta)


def dpaudit_run(spec: Path, store: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``dpaudit run SPEC --store STORE`` as a user runs it, in the spec's directory (the paths
    made absolute first: relative ones name places under the caller's directory)."""
    spec, store = spec.resolve(), store.resolve()
    exe = Path(sys.executable).with_name("dpaudit")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "flows.cli"]
    cmd += ["run", str(spec), "--store", str(store), "--overwrite", *extra]
    if "--no-report" not in extra and "--report" not in extra:
        cmd += ["--report", str(store.with_name("report.html"))]
    return subprocess.run(cmd, cwd=spec.parent, capture_output=True, text=True, timeout=1800)


def declared_epsilon(store: Path, delta: float, geolevel: str = "County") -> float:
    """The exact ε (upper end) of the declared allocation's counts at ``geolevel``, from the store."""
    import xarray as xr

    acc = xr.open_zarr(store, group="accounting")
    return float(acc.eps_exact_upper.sel(geolevel=geolevel, delta=delta))
