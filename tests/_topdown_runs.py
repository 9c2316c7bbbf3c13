"""Published runs of a TopDown release of the shipped country (``examples/country/``) at a chosen
noise — what an agency would hand an auditor — written as one file per run beside the truth, and
the spec that declares them post-processed TopDown of ``pl94_2021_production``."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd

COUNTRY = Path(__file__).resolve().parents[1] / "examples" / "country"
KEYS = ["region", "district", "village"]
MAPPING = (
    '{ US = "All", State = "region", County = "district", Tract = "", Block_Group = "", '
    'Block = "village" }'
)


def cells() -> list[str]:
    head = pd.read_csv(COUNTRY / "country.csv", nrows=0).columns
    return [c for c in head if c not in (*KEYS, "persons")]


def published_runs(factor: float, runs: int, seed: int) -> list[pd.DataFrame]:
    """``runs`` releases of the country's villages by TopDown with every measurement's σ² of the
    country example's allocation times ``factor`` (0.25: ε about twice), noise from ``seed``."""
    from flows.audit.blocks import topdown_histograms
    from flows.spec import load_spec
    from flows.spec.plan import make_plan
    from flows.spec.sources import table_hierarchy

    plan = make_plan(load_spec(COUNTRY / "audit.toml"))
    td = plan.topdown
    assert td is not None and plan.table_hierarchy is not None
    measured = {g: tuple((q, s2 * factor) for q, s2 in lv) for g, lv in td.measured.items()}
    plan = dataclasses.replace(
        plan,
        replicates=runs,
        noise_seed=seed,
        topdown=dataclasses.replace(td, measured=measured),
    )
    _, dp = topdown_histograms(plan, plan.blocks[0])[len(plan.geolevels) - 1]
    tab = table_hierarchy(plan.table_hierarchy)
    order = pd.Index(tab.labels[tab.levels[-1]])
    truth = pd.read_csv(COUNTRY / "country.csv", dtype={k: str for k in KEYS})
    rows = order.get_indexer(truth["village"])
    assert (rows >= 0).all()
    out = []
    for r in range(runs):
        f = truth[KEYS].copy()
        f[cells()] = np.asarray(dp[r])[rows]
        out.append(f)
    return out


def write_release(
    where: Path, factor: float, runs: int, seed: int, post_processing: str = "topdown"
) -> Path:
    """The truth, ``runs`` published files and a spec declaring them ``post_processing`` of the
    country example's allocation (``"none"``: the raw noise, measured at the villages)."""
    where.mkdir(parents=True, exist_ok=True)
    pd.read_csv(COUNTRY / "country.csv").to_csv(where / "country.csv", index=False)
    for r, f in enumerate(published_runs(factor, runs, seed)):
        f.to_csv(where / f"run{r}.csv", index=False)
    files = ", ".join(f'"run{r}.csv"' for r in range(runs))
    counts = ", ".join(f'"{c}"' for c in cells())
    if post_processing == "none":
        release = 'levels = { Block = "village" }\n'
    else:
        release = f'post_processing = "{post_processing}"\nlevels = {MAPPING}\n'
    spec = where / "audit.toml"
    spec.write_text(
        '[audit]\nallocation = "pl94_2021_production"\nseed = 3\n\n'
        '[population]\nkind = "table"\npath = "country.csv"\nlevels = ["region", "district"]\n'
        f'unit = "village"\nattributes = "pl94"\ncounts = [{counts}]\n\n'
        f'[release]\nkind = "observed"\npublished_files = [{files}]\n{release}\n'
        "[accounting]\ndeltas = [1e-10]\n"
    )
    return spec
