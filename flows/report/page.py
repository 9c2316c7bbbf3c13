"""The page: the Jinja template of the report rendered to HTML text, and its atomic write (a
temporary file beside the output, then :func:`os.replace`)."""

from __future__ import annotations

import importlib.resources
import os
import pathlib
import tempfile
from typing import Any

import jinja2

_TEMPLATE = "report.html.j2"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    return env


def _load_template(env: jinja2.Environment) -> jinja2.Template:
    source = (
        importlib.resources.files("flows.report")
        .joinpath("templates", _TEMPLATE)
        .read_text(encoding="utf-8")
    )
    return env.from_string(source)


def render_page(**context: Any) -> str:
    """The report's HTML: the template rendered with the sections and header in ``context``."""
    env = _environment()
    return _load_template(env).render(**context)


def atomic_write_text(path: pathlib.Path, text: str) -> None:
    """Write ``text`` to ``path`` (mode 644) or leave the old file and no temporary file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
