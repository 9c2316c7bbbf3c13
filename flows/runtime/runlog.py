"""A run's log file, the one place where what a run logs and prints goes, and its private files.

- **Logging** of Prefect and Dask, in this process and in the processes it starts, routed by
  configuration before they are imported (:func:`route_logs`);
- **stderr**, captured at the file-descriptor level while the flow runs (:func:`captured`), so
  what is printed rather than logged (a worker's traceback, Python's "Exception ignored") goes
  there too, and the terminal keeps the progress bar and the one line of the outcome;
- **a failure's trace** (``flows.cli.errors.append_trace``) in the same file (:func:`new_log`).

The console of a run shows dpaudit's progress and its one-line errors only. Everything Prefect and
Dask log — in this process and in the processes it starts (the embedded API server, local Dask
workers), task failures and their tracebacks included — goes to one log file,
:func:`run_log_path` (``$DPAUDIT_LOG_DIR`` or ``<tmp>/dpaudit-<user>/``, one file per run, created
on the first record). The routing is set in the environment before Prefect and Dask are imported
(children inherit it): ``PREFECT_LOGGING_CONFIG_PATH`` names Prefect's own logging configuration
with its console handlers writing to the file, ``DASK_LOGGING`` a logging configuration for
distributed's loggers. A user's own Prefect logging configuration (either variable, or
``$PREFECT_HOME/logging.yml``) or Dask logging variable is left alone.

Prefect 3.8.8 writes the exception of a failed *flow* run to its local result storage whatever the
flow's ``persist_result`` says (tasks obey ``persist_result=False``); that storage is pointed at a
private directory of the run (``PREFECT_RESULTS_LOCAL_STORAGE_PATH``), removed when the process
ends, so nothing piles up under ``$PREFECT_HOME/storage`` (docs/stack.md).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import io
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

#: the run's log file, inherited by the processes the run starts
ENV_LOG = "DPAUDIT_RUN_LOG"
#: where log files go (default: ``<tmp>/dpaudit-<user>``)
ENV_DIR = "DPAUDIT_LOG_DIR"
#: loggers whose console output moves to the log file in a process already logging
_ROUTED = ("prefect", "distributed", "uvicorn", "fastapi", "tornado", "bokeh")
_LOG_FORMAT = "%(asctime)s %(levelname)-7s %(name)s [pid %(process)d] - %(message)s"


def _user() -> str:
    uid = getattr(os, "getuid", None)
    return str(uid()) if uid else (os.environ.get("USERNAME") or "user")


def log_dir() -> Path:
    return Path(os.environ.get(ENV_DIR) or Path(tempfile.gettempdir()) / f"dpaudit-{_user()}")


def run_log_path() -> Path:
    """The log file of this process's run (and of the processes it starts); chosen on the first
    call, ``<log dir>/dpaudit-YYYYmmdd-HHMMSS-<pid>.log``. It exists once something is logged."""
    path = os.environ.get(ENV_LOG)
    if path:
        return Path(path)
    p = log_dir() / f"dpaudit-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    os.environ[ENV_LOG] = str(p)
    return p


def private_dir() -> Path:
    """The run's private directory beside its log (Prefect's logging configuration and result
    files), removed when this process ends."""
    log = run_log_path()
    return log.with_name(f".{log.stem}")


def file_handler(**_: Any) -> logging.Handler:
    """A handler appending to the run's log file (a logging configuration's ``()`` factory)."""
    path = os.environ.get(ENV_LOG)
    if not path:  # a configuration used outside a run: keep the records visible
        return logging.StreamHandler(sys.stderr)
    Path(path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    return logging.FileHandler(path, mode="a", encoding="utf-8", delay=True)


def _prefect_logging_yaml() -> str | None:
    """Prefect's own logging configuration with its console handlers writing to the log file."""
    import yaml

    spec = importlib.util.find_spec("prefect")
    if spec is None or spec.origin is None:
        return None
    config = yaml.safe_load((Path(spec.origin).parent / "logging" / "logging.yml").read_text())
    for name, formatter in (("console", "standard"), ("debug", "debug")):
        if name in config.get("handlers", {}):
            config["handlers"][name] = {
                "()": f"{__name__}.file_handler",
                "level": 0,
                "formatter": formatter,
            }
    return yaml.safe_dump(config, sort_keys=False)


def dask_logging_config() -> dict[str, Any]:
    """distributed's loggers (at its own default levels, ``distributed`` at warning) to the file."""
    levels = {"distributed": "WARNING", "bokeh": "ERROR", "tornado": "CRITICAL"}
    levels["tornado.application"] = "ERROR"
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"run": {"format": _LOG_FORMAT}},
        "handlers": {"run_log": {"()": f"{__name__}.file_handler", "formatter": "run"}},
        "loggers": {
            name: {"level": level, "handlers": ["run_log"], "propagate": False}
            for name, level in levels.items()
        },
    }


def _prefect_config_is_users() -> bool:
    if os.environ.get("PREFECT_LOGGING_CONFIG_PATH") or os.environ.get(
        "PREFECT_LOGGING_SETTINGS_PATH"
    ):
        return True
    home = Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    return (home / "logging.yml").exists()


_routed: list[Path] = []


def route_logs() -> Path:
    """Send Prefect's and Dask's logging of this process and of the processes it starts to
    :func:`run_log_path`; point Prefect's local result storage at :func:`private_dir`. Returns
    the log file. Call before Prefect and Dask are imported (afterwards this process's console
    handlers of their loggers are moved to the file too). Idempotent."""
    log = run_log_path()
    if _routed:
        return log
    if os.environ.get("DPAUDIT_DEBUG") == "1":  # ``dpaudit --debug``: everything on the console
        _routed.append(log)
        return log
    log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _remove_stale_private_dirs(log.parent)
    private = private_dir()
    private.mkdir(mode=0o700, exist_ok=True)
    atexit.register(shutil.rmtree, private, ignore_errors=True)
    os.environ.setdefault("PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(private / "results"))
    if not _prefect_config_is_users():
        text = _prefect_logging_yaml()
        if text is not None:
            (private / "prefect-logging.yml").write_text(text)
            os.environ["PREFECT_LOGGING_CONFIG_PATH"] = str(private / "prefect-logging.yml")
    if not any(k == "DASK_LOGGING" or k.startswith("DASK_LOGGING__") for k in os.environ):
        os.environ["DASK_LOGGING"] = repr(dask_logging_config())
    _move_console_handlers()
    _routed.append(log)
    return log


def _remove_stale_private_dirs(directory: Path) -> None:
    """Private directories of runs whose process is gone (killed: its exit handler never ran)."""
    for d in directory.glob(".dpaudit-*-*"):
        pid = d.name.rpartition("-")[2]
        if d.is_dir() and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(d, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def _move_console_handlers() -> None:
    """In a process where Prefect or distributed already set up logging: their handlers writing
    to the console now write to the log file."""
    if not any(m in sys.modules for m in ("prefect", "distributed")):
        return
    consoles = {id(s) for s in (sys.stderr, sys.__stderr__, sys.stdout, sys.__stdout__)}
    names = [""] + [
        n for n in list(logging.Logger.manager.loggerDict) if n.split(".")[0] in _ROUTED
    ]
    shared: logging.Handler | None = None
    for name in names:
        logger = logging.getLogger(name)
        for h in list(logger.handlers):
            if type(h).__name__ not in ("StreamHandler", "PrefectConsoleHandler"):
                continue
            if id(getattr(h, "stream", None)) not in consoles:
                continue
            if shared is None:
                shared = file_handler()
                shared.setFormatter(logging.Formatter(_LOG_FORMAT))
            logger.removeHandler(h)
            logger.addHandler(shared)


def new_log(what: str) -> Path | None:
    """A new, empty log file named after ``what`` and the time (None if none can be created); the
    run's log (:func:`run_log_path`, where Prefect's and Dask's logging already go)
    when it is chosen in this log directory, so a run keeps one log file."""
    run_log = os.environ.get(ENV_LOG)
    if run_log and Path(run_log).parent == log_dir():
        try:
            Path(run_log).parent.mkdir(parents=True, exist_ok=True)
            Path(run_log).touch()
            return Path(run_log)
        except OSError:
            return None
    try:
        d = log_dir()
        d.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        fd, name = tempfile.mkstemp(prefix=f"{what}-{stamp}-", suffix=".log", dir=d)
        os.close(fd)
        return Path(name)
    except OSError:
        return None


def _stderr_fd() -> int | None:
    """2 if ``sys.stderr`` writes to file descriptor 2 (a real process, not a test runner's buffer)."""
    try:
        return 2 if sys.stderr.fileno() == 2 else None
    except (AttributeError, ValueError, io.UnsupportedOperation):
        return None


def _terminal_handlers() -> list[logging.StreamHandler[TextIO]]:
    """The stream handlers of every logger that write to stderr (Prefect's console, Dask's)."""
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    found = []
    for lg in loggers:
        for h in getattr(lg, "handlers", []):
            if (
                isinstance(h, logging.StreamHandler)
                and not isinstance(h, logging.FileHandler)
                and h.stream in (sys.stderr, sys.__stderr__)
            ):
                found.append(h)
    return found


@contextlib.contextmanager
def captured(log: Path | None, debug: bool = False) -> Iterator[TextIO]:
    """Send stderr to ``log`` for the block; yield the stream that still reaches the terminal.

    At the file-descriptor level too (when stderr is descriptor 2), so processes started in the
    block (Dask workers, an embedded Prefect server) write to the log as well.
    """
    if debug or log is None:
        yield sys.stderr
        return
    terminal = sys.stderr
    with log.open("a", encoding="utf-8", errors="replace", buffering=1) as sink:
        fd = _stderr_fd()
        saved = None
        if fd is not None:
            terminal.flush()
            saved = os.dup(fd)
            os.dup2(sink.fileno(), fd)
            terminal = open(  # closed in the finally below
                saved, "w", encoding=sys.stderr.encoding, errors="replace", closefd=False
            )
        handlers = _terminal_handlers()
        streams = [h.setStream(sink) for h in handlers]
        consoles = [getattr(h, "console", None) for h in handlers]  # Prefect's: a rich Console
        files = [c.file if c is not None else None for c in consoles]
        for c in consoles:
            if c is not None:
                c.file = sink
        try:
            with contextlib.redirect_stderr(sink):
                yield terminal
        finally:
            for h, s, c, f in zip(handlers, streams, consoles, files, strict=True):
                if s is not None:
                    h.setStream(s)
                if c is not None:
                    c.file = f
            if saved is not None:
                terminal.flush()
                sys.stderr.flush()
                os.dup2(saved, fd)  # type: ignore[arg-type]
                terminal.close()
                os.close(saved)
