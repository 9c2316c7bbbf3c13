"""A server started under flows.runtime.lifeline ends when the process that started it is killed (SIGKILL):
by the kernel's parent-death signal when the main thread started it, by its parent watch when
another thread did (which may end long before the process). Without the wrapper it lives on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.integration._processes import alive, free_port, port_open

PARENT = textwrap.dedent(
    """
    import subprocess, sys, threading, time
    from flows.runtime import lifeline
    port, how = sys.argv[1], sys.argv[2]
    argv = ["-m", "http.server", "--bind", "127.0.0.1", port]

    def start():
        cmd = lifeline.command(argv) if how != "plain" else [sys.executable, *argv]
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(p.pid, flush=True)

    if how == "thread":  # the starting thread ends at once; the process lives on
        t = threading.Thread(target=start)
        t.start()
        t.join()
    else:
        start()
    time.sleep(600)
    """
)


def wait_until(cond: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return bool(cond())  # type: ignore[operator]


@pytest.mark.parametrize("how", ["main", "thread", "plain"])
def test_child_ends_with_its_killed_parent(how: str) -> None:
    port = free_port()
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(port), how],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert wait_until(lambda: port_open(port), 20), "the server did not start"
        if how == "thread":  # the thread that started it has ended: the server must still serve
            time.sleep(1.0)
            assert alive(child) and port_open(port)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        # a killed process shows as a zombie while its other threads still close its files: the
        # port is free a moment later
        ended = wait_until(lambda: not alive(child) and not port_open(port), 3.0)
        if how == "plain":  # the control: an unwrapped child outlives its killed parent
            assert not ended and alive(child) and port_open(port)
        else:
            assert ended, f"the server (pid {child}) outlived its killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)
        if child and alive(child):
            os.kill(child, signal.SIGKILL)
