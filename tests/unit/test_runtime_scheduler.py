"""A scheduler address that is not a Dask scheduler is refused within cluster.connect_timeout, with
one line naming the address and the fix: an HTTP server (which waits for a request), a server that
speaks first (its ``HTTP/1.1`` is 3.07 EiB to Dask's frame reader), a closed port. A real
scheduler passes."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from flows.runtime.cluster import task_runner
from flows.runtime.reachability import ClusterUnreachableError, check_scheduler
from tests.integration._processes import free_port, serving_http

TIMEOUT = 2.0
#: the timeout of the checks that must not wait for it: a refusal "at once" takes far less, however
#: busy the machine, and one that waited would take all of it
LONG_TIMEOUT = 120.0
#: what a loaded machine may add to a wait of TIMEOUT (threads scheduled late)
SLACK_S = 60.0


@pytest.fixture
def http_server() -> Iterator[str]:
    with serving_http() as address:
        yield address


@pytest.fixture
def chatty_server() -> Iterator[str]:
    """A TCP server that answers every connection at once with an HTTP error, as uvicorn does
    to bytes it cannot parse."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                time.sleep(0.2)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield f"tcp://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        t.join(5)
        srv.close()


def refused(address: str, timeout: float = TIMEOUT) -> tuple[str, float]:
    t0 = time.monotonic()
    with pytest.raises(ClusterUnreachableError) as err:
        check_scheduler(address, timeout)
    return str(err.value), time.monotonic() - t0


def test_an_http_server_is_refused_within_the_timeout(http_server: str) -> None:
    msg, took = refused(http_server)
    assert TIMEOUT <= took < TIMEOUT + SLACK_S  # it waited for the handshake, then gave up
    assert msg.splitlines() == [msg]
    assert f"{http_server!r} does not answer as a Dask scheduler" in msg
    assert f"no Dask handshake within {TIMEOUT:g} s" in msg
    assert "cluster.connect_timeout" in msg and 'cluster.scheduler = ""' in msg


def test_a_server_speaking_http_first_is_refused_at_once(chatty_server: str) -> None:
    msg, took = refused(chatty_server, LONG_TIMEOUT)
    assert took < LONG_TIMEOUT  # refused on the first bytes, not when the timeout ran out
    assert msg.splitlines() == [msg]
    assert "b'HTTP/1.1'" in msg and "not a Dask handshake" in msg


def test_a_closed_port_is_refused_at_once() -> None:
    address = f"tcp://127.0.0.1:{free_port()}"
    msg, took = refused(address, LONG_TIMEOUT)
    assert took < LONG_TIMEOUT  # refused by the port, not when the timeout ran out
    assert msg.splitlines() == [msg]
    assert f"Dask scheduler at {address!r} is unreachable (Connection refused)" in msg


def test_the_task_runner_checks_the_scheduler_first(http_server: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(ClusterUnreachableError, match="does not answer as a Dask scheduler"):
        task_runner(http_server, 1, 1, "1GiB", connect_timeout=TIMEOUT)
    assert time.monotonic() - t0 < TIMEOUT + SLACK_S


def test_a_real_scheduler_passes_and_its_runner_has_the_timeout() -> None:
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=0, processes=False, protocol="tcp://", host="127.0.0.1", dashboard_address=None
    ) as cluster:
        check_scheduler(cluster.scheduler_address, TIMEOUT)
        runner = task_runner(cluster.scheduler_address, 1, 1, "1GiB", connect_timeout=TIMEOUT)
        assert runner.client_kwargs["timeout"] == TIMEOUT
