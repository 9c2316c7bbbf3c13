"""What the audited release is, for the report's header: the release kind, the population and,
for a TopDown release, its attribute schema (``population.attributes``) — from the stored spec —
and for a production schema what its residuals hold (the store's ``production`` group: the query
cells stored and those left out, zero in the truth and in every replicate)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from flows.report.format import fmt_num
from flows.report.store_data import parse_spec_toml

if TYPE_CHECKING:
    from storage.result_store import ResultStore

#: words of each TopDown attribute schema (``auditlib.geography.schema``)
SCHEMA_WORDS = {
    "total": "the total count",
    "pl94": "PL94 voting age × Hispanic × 7 races",
    "pl94_production": "the PL94-171 production persons histogram: hhgq × voting age × Hispanic "
    "× CENRACE",
    "dhc_production": "the DHC production persons histogram: relgq × sex × age × Hispanic × "
    "CENRACE",
}


def release_line(attrs: Mapping[str, Any], *, words: bool = True) -> str | None:
    """E.g. "topdown on the spine (ST51) · schema pl94_production (2,016 cells: …)"; ``None`` for a
    store without a spec."""
    spec = parse_spec_toml(attrs.get("spec_toml"))
    if not spec:
        return None
    from auditlib.geography.schema import schema

    release = spec.get("release", {}).get("kind", "allocation")
    pop = spec.get("population", {})
    kind = pop.get("kind", "synthetic")
    where = kind
    if kind == "spine":
        states = pop.get("spine_states", "all")
        shown = ", ".join(states) if isinstance(states, list) else str(states)
        where = f"the spine (states: {shown}{_part_of_nation(spec, states)})"
    out = f"{release} on {where}"
    lowest = spec.get("release", {}).get("lowest_level", "")
    if release == "topdown" and isinstance(lowest, str) and lowest:
        from flows.report.accounting import unsimulated_levels

        below = unsimulated_levels(attrs)
        out += f" down to {lowest}" + (f" ({', '.join(below)} not simulated)" if below else "")
    if release == "published":  # the table is the published counts, TopDown's output
        out = f"published TopDown counts ({where}): error bars by approximate Monte Carlo"
    if release in ("topdown", "published"):
        name = str(pop.get("attributes", "total"))
        try:
            cells = f"{schema(name).n_cells:,} cells"
        except Exception:  # a schema this dpaudit does not know
            cells = "unknown schema"
        said = SCHEMA_WORDS.get(name) if words else None
        out += f" · schema {name} ({cells}" + (f": {said})" if said else ")")
    return out


def _part_of_nation(spec: Mapping[str, Any], states: Any) -> str:
    """For a spine run over some of the region's states: its national level (``US``) is the sum
    of those states only, which the level's name does not say ("; US level: 7 of 51 states, not
    the nation"); "" for every state (or a spec this dpaudit cannot read)."""
    from flows.spec.sources import spine_state_labels

    region = str(spec.get("audit", {}).get("region", "US"))
    try:
        total = len(spine_state_labels(region))
    except Exception:  # a region this dpaudit does not know
        return ""
    n = states if isinstance(states, int) else len(states) if isinstance(states, list) else total
    if n >= total:
        return ""
    return f"; {region} level: {n} of {total} states, not the nation"


def production_note(ds: xr.Dataset | None) -> str | None:
    """What a production schema's residuals hold, from the ``production`` group."""
    if ds is None or "stored_cells" not in ds:
        return None
    stored = int(np.asarray(ds["stored_cells"].values).sum())
    zero = int(np.asarray(ds["zero_cells"].values).sum())
    total = stored + zero
    share = 100.0 * stored / total if total else 0.0
    return (
        f"Sparse residuals of schema {ds.attrs.get('schema', '?')}: {stored:,} query cells stored "
        f"(non-zero in the truth or in a replicate's release; {fmt_num(share, 3)} % of "
        f"{total:,}); the other {zero:,} are zero in the truth and in every replicate (residual 0) "
        "and are not stored. The EPL and the residual figures condition on a cell being stored."
    )


def open_production(store: ResultStore) -> xr.Dataset | None:
    """The store's ``production`` group, or ``None`` (any other run)."""
    try:
        return store.dataset("production").load()
    except (FileNotFoundError, KeyError, OSError, ValueError):
        return None
