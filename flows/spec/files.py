"""Spec files: read (TOML, UTF-8) and validated into an :class:`AuditSpec` with one readable error,
and the default spec shipped with the package."""

from __future__ import annotations

import tomllib
from importlib.resources import files
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from auditlib.allocation_file import is_allocation_path
from auditlib.exceptions import SpecError
from flows.spec.model import AuditSpec
from flows.spec.production import PRODUCTION_SCHEMAS, check_dense_blocks

#: keys a spec no longer takes, and why: said instead of "unknown key"
REMOVED_KEYS = {
    "epl.method": "the EPL estimate is Flaxman & Petti's kernel log-ratio, the only one",
}


def _format_error(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        typ = e["type"]
        value = e.get("input")
        if typ == "extra_forbidden" and loc in REMOVED_KEYS:
            lines.append(f"{loc}: no longer a key ({REMOVED_KEYS[loc]}); drop it")
        elif typ == "extra_forbidden":
            lines.append(
                f"{loc}: unknown key (value {value!r}); check its spelling in the spec reference"
            )
        elif typ == "literal_error":
            allowed = e.get("ctx", {}).get("expected", "")
            lines.append(f"{loc} = {value!r}: not allowed; allowed: {allowed}")
        elif typ == "int_type":  # strict: no bool, no quoted or decimal number
            lines.append(
                f"{loc} = {value!r}: must be an integer, written without quotes or a decimal "
                "point (e.g. 4)"
            )
        elif loc:
            msg = e["msg"].removeprefix("Value error, ")
            lines.append(f"{loc} = {value!r}: {msg}")
        else:
            lines.append(e["msg"].removeprefix("Value error, "))
    return "; ".join(lines)


def parse_spec(data: dict[str, Any], origin: str = "spec") -> AuditSpec:
    try:
        spec = AuditSpec.model_validate(data)
    except ValidationError as err:
        raise SpecError(f"invalid {origin}: {_format_error(err)}") from None
    if spec.population.attributes in PRODUCTION_SCHEMAS:
        from flows.spec.plan import make_plan

        try:
            plan = make_plan(spec)
            if spec.population.kind != "spine":  # dense blocks: within MAX_BLOCK_BYTES
                check_dense_blocks(
                    plan,
                    spec.population.attributes,
                    spec.release.kind,
                    spec.simulation.max_cells_per_query,
                )
        except ValueError as exc:
            raise SpecError(f"invalid {origin}: {exc}") from None
    return spec


def load_spec(path: str | Path | None = None) -> AuditSpec:
    """Read and validate a spec file (``None``: the default spec shipped with the package)."""
    if path is None:
        return parse_spec(tomllib.loads(default_spec_text()), "default spec")
    p = Path(path)
    if not p.is_file():
        raise SpecError(
            f"spec file not found: {str(p)!r}; pass a TOML file or omit it for defaults"
        )
    try:
        data = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"spec {str(p)!r} is not valid TOML: {exc}") from None
    except RecursionError:
        raise SpecError(
            f"spec {str(p)!r} nests its arrays or tables too deeply to be read (deeper than "
            "Python's recursion limit); a spec nests a few levels only: check its brackets"
        ) from None
    audit = data.get("audit")
    if isinstance(audit, dict) and isinstance(audit.get("allocation"), str):
        # an allocation file's relative path is relative to the spec file's directory, too
        if is_allocation_path(audit["allocation"]):
            where = p.parent / Path(audit["allocation"]).expanduser()
            audit["allocation"] = str(where.resolve())
    pop = data.get("population")
    if isinstance(pop, dict) and isinstance(pop.get("path"), str) and pop["path"]:
        # a table's relative path is relative to the spec file's directory
        pop["path"] = str((p.parent / Path(pop["path"]).expanduser()).resolve())
    rel = data.get("release")
    if isinstance(rel, dict) and isinstance(rel.get("published_files"), list):
        # an observed release's run files: relative to the spec file's directory, as a table's
        rel["published_files"] = [
            str((p.parent / Path(f).expanduser()).resolve()) if isinstance(f, str) else f
            for f in rel["published_files"]
        ]
    if isinstance(rel, dict) and isinstance(rel.get("areas"), str) and rel["areas"]:
        rel["areas"] = str((p.parent / Path(rel["areas"]).expanduser()).resolve())  # as a table's
    return parse_spec(data, f"spec {str(p)!r}")


def default_spec_text() -> str:
    return (files("flows.spec") / "default_spec.toml").read_text()
