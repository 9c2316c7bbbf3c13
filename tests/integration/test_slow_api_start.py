"""An embedded Prefect API that is up but slow to answer its first health check (a busy machine,
the database's migrations) does not fail the run: Prefect's own start gives up on the first answer
later than httpx's 5 s; dpaudit's keeps polling until its start-up timeout, and past it stops the
server and says what to do. The slow server is a real process answering real HTTP on the port
the embedded server was given."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import pytest

from flows.runtime.embedded_api import EmbeddedAPIServer

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
    class Slow(EmbeddedAPIServer):
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


PREFECT_SERVER_IN_CLIENT = """
import sys
import httpx
from flows.runtime.cluster import apply_prefect_defaults, prefect_api
apply_prefect_defaults()
with prefect_api() as url:
    print(httpx.get(url + "/health", timeout=30).status_code)
    print(httpx.get(url + "/admin/version", timeout=30).status_code)
print(sorted(m for m in sys.modules if m.startswith("prefect.server")))
"""


def test_the_embedded_api_is_prefects_server_and_the_run_does_not_import_it(
    tmp_path: Any,
) -> None:
    """The real server answers its health and version routes, and the process that started it
    holds none of ``prefect.server`` (its import is the server process's work, not the run's)."""
    env = {**os.environ, "PREFECT_HOME": str(tmp_path), "PREFECT_API_URL": ""}
    out = subprocess.run(
        [sys.executable, "-c", PREFECT_SERVER_IN_CLIENT],
        env=env, capture_output=True, text=True, timeout=300, check=True,
    ).stdout.split("\n")  # fmt: skip
    assert out[:3] == ["200", "200", "[]"], out
