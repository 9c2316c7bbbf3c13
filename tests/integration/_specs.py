"""The tiny audit specs the integration tests run: one small base, each test's changes named; and
a spec file whose audit reads an allocation file beside it, as loaded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# One unit per level below State, two blocks per block group: the smallest hierarchy with siblings.
TINY_FANOUT = {
    "County": 1,
    "Prim": 1,
    "Tract_Subset_Group": 1,
    "Tract_Subset": 1,
    "Block_Group": 1,
    "Block": 2,
}


def tiny_spec(
    *, states: int = 1, fanout: dict[str, int] | None = None, **sections: dict[str, Any]
) -> dict[str, Any]:
    """A spec mapping: 2 replicates, ``states`` states of :data:`TINY_FANOUT` updated by ``fanout``,
    queries of at most 2 cells, uncomposed accounting at delta 1e-10 on a 20-point grid.

    Each keyword section (``audit={"seed": 11}``, ``cluster=...``) updates that section's keys.
    """
    spec: dict[str, Any] = {
        "audit": {"replicates": 2},
        "population": {"states": states, "fanout": {**TINY_FANOUT, **(fanout or {})}},
        "simulation": {"max_cells_per_query": 2},
        "accounting": {"deltas": [1e-10], "composed": False, "eps_grid_points": 20},
    }
    for name, keys in sections.items():
        spec[name] = {**spec.get(name, {}), **keys}
    return spec


def to_toml(spec: dict[str, Any]) -> str:
    """``spec`` as the TOML file a user writes: one table per section, inline tables inside."""
    lines = []
    for name, keys in spec.items():
        lines.append(f"[{name}]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in keys.items()]
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {value!r}")


def with_allocation_file(tmp_path: Path, allocation_csv: str, rest: str) -> str:
    """The TOML of the spec loaded (``load_spec(...).to_toml()``) from ``tmp_path/spec.toml``:
    ``[audit]`` with ``allocation = "mine.csv"`` (written there from ``allocation_csv``), then
    ``rest`` (the audit's other keys and the other sections)."""
    from flows.spec import load_spec

    (tmp_path / "mine.csv").write_text(allocation_csv, encoding="utf-8")
    spec = tmp_path / "spec.toml"
    spec.write_text('[audit]\nallocation = "mine.csv"\n' + rest, encoding="utf-8")
    return load_spec(spec).to_toml()
