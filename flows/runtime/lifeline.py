"""Child processes that end with the process that started them, however it ends.

A server started for one run (the embedded Prefect API) must not outlive the run: after a
``kill -9`` of ``dpaudit run`` nothing would stop it, and it would hold its port and the
``PREFECT_HOME`` database. :func:`command` wraps a ``python -m module ...`` command so that the
child, before it runs the module:

- on Linux asks the kernel for SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``); the
  kernel sends it when the *thread* that started the child ends, so this is only asked for when
  that thread is the main thread (which lives as long as the process);
- everywhere, watches its parent: a thread polls ``os.getppid()`` every :data:`POLL_S` seconds
  and ends the process as soon as it differs from the parent's pid (the child was re-parented to
  init or a subreaper);
- ends at once if the parent died before either was in place.

Dask's worker processes need none of this: distributed's nanny gives each worker a pipe whose
closing (the parent's death) ends the worker.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import threading
import time

#: seconds between two looks at the parent's pid
POLL_S = 0.5
#: prctl option: signal the process when its parent (thread) dies (linux/prctl.h)
_PR_SET_PDEATHSIG = 1


def command(module_argv: list[str]) -> list[str]:
    """``[python, -m, flows.runtime.lifeline, PARENT, MAIN, -m, module, args...]`` for
    ``module_argv = [-m, module, args...]``, the parent being this process."""
    if module_argv[:1] != ["-m"] or len(module_argv) < 2:
        raise ValueError(f"expected ['-m', module, ...], got {module_argv[:2]!r}")
    main = "1" if threading.current_thread() is threading.main_thread() else "0"
    return [sys.executable, "-m", "flows.runtime.lifeline", str(os.getpid()), main, *module_argv]


def _set_death_signal() -> bool:
    """Ask Linux for SIGKILL when the parent dies; False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    while True:
        if os.getppid() != parent:
            os._exit(1)
        time.sleep(POLL_S)


def guard(parent: int, death_signal: bool = True) -> None:
    """End this process when ``parent`` is no longer its parent (see the module's docstring)."""
    if death_signal:
        _set_death_signal()
    if os.getppid() != parent:  # the parent died before the death signal was set
        os._exit(1)
    threading.Thread(target=_watch, args=(parent,), name="lifeline", daemon=True).start()


def main(argv: list[str]) -> None:
    parent, main_thread, flag, module, *rest = argv
    if flag != "-m":
        raise SystemExit(
            f"usage: python -m flows.runtime.lifeline PARENT MAIN -m module [args...], got {argv}"
        )
    guard(int(parent), death_signal=main_thread == "1")
    sys.argv = [module, *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
