"""The embedded Prefect API server of a run that names none: a uvicorn process of Prefect's server
app on a free loopback port, ended with this process however it ends (flows/runtime/lifeline.py).

It starts the process Prefect's ``SubprocessASGIServer`` starts (Prefect 3.8.8,
prefect/server/api/server.py, ``_run_uvicorn_command``: the same command and environment) without
importing ``prefect.server`` here: that import builds the server's models and routes in the
process that only talks to the API (≈ 4 CPU-s on 2 busy cores, the largest part of what
``dpaudit run`` imports); the server process imports them as it boots, beside this one's work.
Its start is patient with a server that is up but slow to answer (:func:`wait_healthy`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import random
import socket
import subprocess
import time
from typing import Any

from flows.runtime import lifeline

#: where a free port is looked for (Prefect's range for its temporary servers)
PORT_RANGE = range(8000, 9000)


class EmbeddedAPIServer:
    """One Prefect API server process: :meth:`launch` starts it and returns at once,
    :meth:`start` also waits for its health check, :meth:`stop` ends it."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port
        self.server_process: subprocess.Popen[Any] | None = None
        self.running = False

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def find_available_port(self) -> int:
        for _ in range(10):
            port = random.choice(PORT_RANGE)
            with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                    return port
                except OSError:
                    pass
            time.sleep(random.uniform(0.1, 0.5))
        raise RuntimeError("no free port for the embedded Prefect API after 10 attempts")

    def launch(self) -> None:
        """Start the server's process on a free port and return at once."""
        if self.running:
            return
        if self.port is None:
            self.port = self.find_available_port()
        self.running = True
        self.server_process = self._run_uvicorn_command()
        atexit.register(self.stop)

    def start(self, timeout: float) -> None:
        """:meth:`launch`, then poll its health for up to ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        self.launch()
        wait_healthy(self, deadline)

    def stop(self) -> None:
        """End the server's process (terminate, then kill after 5 s)."""
        if self.server_process is not None:
            self.server_process.terminate()
            try:
                self.server_process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.server_process.kill()
                self.server_process.wait()
            finally:
                self.server_process = None
        self.running = False

    def _run_uvicorn_command(self) -> subprocess.Popen[Any]:
        import prefect
        from prefect.settings import get_current_settings

        server_env = {
            "PREFECT_UI_ENABLED": "0",
            "PREFECT__SERVER_EPHEMERAL": "1",
            "PREFECT__SERVER_FINAL": "1",
        }
        args = ["-m", "uvicorn", "--app-dir", str(prefect.__module_path__.parent)]
        args += ["--factory", "prefect.server.api.server:create_app"]
        args += ["--host", "127.0.0.1", "--port", str(self.port)]
        args += ["--log-level", "error", "--lifespan", "on"]
        return subprocess.Popen(
            args=lifeline.command(args),
            env={
                **os.environ,
                **server_env,
                **get_current_settings().to_environment_variables(exclude_unset=True),
            },
        )


def wait_healthy(server: Any, deadline: float, read_timeout: float = 30.0) -> None:
    """Poll ``server``'s ``/health`` (connection refused or answers late: try again) until it
    answers 200, its process ends, or ``deadline`` (``time.monotonic``) passes; then stop it and
    raise."""
    import httpx

    with httpx.Client() as client:
        while (left := deadline - time.monotonic()) > 0:
            if server.server_process.poll() is not None:
                code = server.server_process.returncode
                server.stop()
                raise RuntimeError(
                    f"the embedded Prefect API server exited with code {code} while starting"
                )
            try:
                answer = client.get(f"{server.api_url}/health", timeout=min(read_timeout, left))
                if answer.status_code == 200:
                    return
            except (httpx.TimeoutException, httpx.ConnectError):
                pass
            time.sleep(0.2)
    server.stop()
    raise RuntimeError(
        "the embedded Prefect API server did not answer its health check in time; the machine "
        "may be overloaded: retry, or start a server (`prefect server start`) and set "
        "PREFECT_API_URL"
    )
