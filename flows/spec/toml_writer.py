"""A minimal TOML writer for the spec's shape: tables of scalars, lists and inline tables."""

from __future__ import annotations

from typing import Any


def dump_toml(data: dict[str, Any]) -> str:
    """Minimal TOML writer for the spec's shape (tables of scalars, lists and inline tables)."""

    def scalar(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return repr(v)
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(v, list | tuple):
            return "[" + ", ".join(scalar(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f'"{k}" = {scalar(x)}' for k, x in v.items()) + " }"
        raise TypeError(f"cannot write {type(v).__name__} to TOML")

    out = []
    for section, body in data.items():
        out.append(f"[{section}]")
        out.extend(f"{k} = {scalar(v)}" for k, v in body.items() if v is not None)
        out.append("")
    return "\n".join(out)
