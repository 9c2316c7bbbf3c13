"""The examples' documented commands, read from the examples themselves and run as written: each
``python examples/…`` line of a script's docstring, the ``dpaudit …`` lines of a file's leading
comment; run as subprocesses in a copy of the repository's ``examples/`` (the repository root's
layout, so a run's ``results/`` stays out of the source tree), ``python`` being this interpreter
and ``dpaudit`` its command, the repository first on the import path; and an example script loaded
as a module, for the tests that call its functions."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
#: Tumult's own environment, where examples/clients.py makes it (ignored by git)
TUMULT_VENV = ROOT / ".venv-tumult"


def load_example(script: str, name: str) -> ModuleType:
    """``examples/<script>`` loaded as the module ``name``, registered in ``sys.modules`` (its
    dataclasses resolve their annotations there)."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / script)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def docstring_commands(path: Path) -> list[str]:
    """The ``python examples/…`` commands of a script's docstring, comments dropped."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    lines = [line.strip() for line in doc.splitlines()]
    return [re.sub(r"\s+#.*$", "", line) for line in lines if line.startswith("python examples/")]


def comment_commands(path: Path) -> list[str]:
    """The ``dpaudit …`` commands of a file's leading comment."""
    out = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        text = line.lstrip("#").strip()
        if text.startswith("dpaudit "):
            out.append(text)
    return out


def dpaudit() -> list[str]:
    exe = Path(sys.executable).with_name("dpaudit")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "flows.cli"]


def copy_examples(root: Path) -> None:
    """The repository's examples under ``root/examples`` (no results of earlier runs)."""
    shutil.copytree(
        EXAMPLES,
        root / "examples",
        ignore=shutil.ignore_patterns("__pycache__", "results", "*.zarr", "report.html"),
    )


def documented_env(logs: Path, *, api: bool = True) -> dict[str, str]:
    """The environment of a documented run: the repository importable, Tumult's environment at
    the repository root; with ``api`` the Prefect API of the session's harness (active: the
    caller holds ``prefect_harness``)."""
    path = os.environ.get("PYTHONPATH", "")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else ""),
        "DPAUDIT_LOG_DIR": str(logs),
        "DPAUDIT_TUMULT_VENV": str(TUMULT_VENV),
    }
    if api:
        from prefect.settings import PREFECT_API_URL

        env["PREFECT_API_URL"] = str(PREFECT_API_URL.value())
    return env


def run_as_documented(
    where: str, command: str, root: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """``command`` as written, in ``root / where`` (``root``: a copy of the examples)."""
    argv = shlex.split(command)
    assert argv[0] in ("python", "dpaudit"), command
    head = [sys.executable] if argv[0] == "python" else dpaudit()
    return subprocess.run(
        [*head, *argv[1:]],
        cwd=root / where,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )


def epsilon_declared(store: Path, geolevel: str, delta: float) -> float:
    """The exact ε (upper end) the store's accounting gives ``geolevel`` at ``delta``."""
    import xarray as xr

    acc = xr.open_zarr(store, group="accounting")
    return float(acc.eps_exact_upper.sel(geolevel=geolevel, delta=delta))
