"""An embedded Prefect API that is up but slow to answer its first health check (a busy machine,
the database's migrations) does not fail the run: Prefect's own start gives up on the first answer
later than httpx's 5 s; dpaudit's keeps polling until its start-up timeout, and past it stops the
server and says what to do. The slow server is a real process answering real HTTP on the port
the embedded server was given."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest

from flows.runtime.cluster import embedded_server_class

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# an HTTP server whose first `late` answers to /health come after `delay` seconds
SLOW_SERVER = """
import sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
port, late, delay = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
seen = [0]
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        seen[0] += 1
        if seen[0] <= late:
            time.sleep(delay)
        try:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"true")
        except OSError:
            pass
    def log_message(self, *a):
        pass
HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def _server(late: int, delay: float) -> Any:
    base = embedded_server_class()

    class Slow(base):  # type: ignore[misc, valid-type]
        _instances: dict[int | None, Any] = {}  # noqa: RUF012 (Prefect's)

        def _run_uvicorn_command(self) -> subprocess.Popen[Any]:
            cmd = [sys.executable, "-c", SLOW_SERVER, str(self.port), str(late), str(delay)]
            return subprocess.Popen(cmd)

    return Slow()


def test_a_server_slow_to_answer_its_first_health_check_still_starts() -> None:
    server = _server(late=1, delay=7.0)  # later than httpx's default 5 s read timeout
    try:
        server.start(timeout=60)  # raises if the slow answer made it give up
        assert server.server_process.poll() is None  # up, and kept
    finally:
        server.stop()


def test_a_server_that_never_answers_in_time_is_stopped_with_a_clear_error() -> None:
    server = _server(late=10**6, delay=40.0)  # every answer later than the 30 s poll
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="did not answer its health check in time"):
        server.start(timeout=8)
    assert time.monotonic() - t0 < 20  # the start-up timeout, not the slow answers, decides
    assert not server.running and server.server_process is None  # stopped, not left behind
