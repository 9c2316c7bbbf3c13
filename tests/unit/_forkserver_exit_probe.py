"""Preloaded into a forkserver by tests/unit/test_forked_workers.py: at the interpreter's normal
exit, writes the process id to the file named by ``DPAUDIT_TEST_FORKSERVER_EXIT``."""

from __future__ import annotations

import atexit
import os


def _mark() -> None:
    path = os.environ.get("DPAUDIT_TEST_FORKSERVER_EXIT")
    if path:
        with open(path, "a") as f:
            f.write(f"{os.getpid()}\n")


atexit.register(_mark)
