"""Whether the cluster and the API a run names answer, checked before anything is written.

- :func:`check_scheduler` — a Dask scheduler answers at an address within
  ``cluster.connect_timeout`` seconds: its handshake is read here, without Dask's frame reader
  (which trusts the length it reads and waits for ever for a peer that says nothing).
- :func:`check_reachable` — a TCP connection opens (the Prefect API of ``PREFECT_API_URL``).
- :func:`redact_url` — an address without its credentials, for messages and logs.

Either check raises :class:`ClusterUnreachableError`, one line naming the address and the fix.
"""

from __future__ import annotations

import socket
import struct
import time
from urllib.parse import urlparse

from auditlib.exceptions import DPAuditError

#: seconds to reach a Dask scheduler and get its handshake (the spec's cluster.connect_timeout)
CONNECT_TIMEOUT_S = 10.0


class ClusterUnreachableError(DPAuditError, ConnectionError):
    """The configured Dask scheduler or Prefect API does not answer."""


def redact_url(url: str) -> str:
    """``url`` without credentials (``user:password@``), for messages and logs."""
    u = urlparse(url)
    if u.username is None and u.password is None:
        return url
    host = u.hostname or ""
    netloc = f"***@{host}" + (f":{u.port}" if u.port else "")
    return u._replace(netloc=netloc).geturl()


def _host_port(address: str, what: str, fix: str) -> tuple[str, int]:
    u = urlparse(address if "://" in address else f"tcp://{address}")
    try:
        host, port = u.hostname, u.port
    except ValueError:  # a port that is not a number
        host, port = None, None
    if not host or not port:
        raise ClusterUnreachableError(f"{what} address {address!r} has no host:port; {fix}")
    return host, port


def check_reachable(address: str, what: str, fix: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Open (and close) a TCP connection to ``address`` within ``timeout`` s or raise a clear error."""
    host, port = _host_port(address, what, fix)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        raise ClusterUnreachableError(
            f"{what} at {address!r} is unreachable ({exc.strerror or exc}); {fix}"
        ) from None


#: a Dask scheduler's handshake is a few hundred bytes; a larger announced length is not one
_MAX_HANDSHAKE = 1 << 20
SCHEDULER_FIX = (
    "give the address `dask scheduler` prints (e.g. tcp://HOST:8786), raise cluster.connect_timeout "
    'for a slow network, or set cluster.scheduler = "" for a local cluster'
)


def check_scheduler(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Check within ``timeout`` seconds that a Dask scheduler answers at ``address``, or raise
    :class:`ClusterUnreachableError` (one line naming the address and the fix).

    A Dask scheduler speaks first: on a ``tcp://`` address its handshake (an 8-byte frame length,
    then msgpack frames) is read here without Dask's frame reader, which trusts the length it reads
    (an HTTP server's ``HTTP/1.1`` is 3.07 EiB to it) and waits for ever for a peer that says
    nothing. Other schemes (``tls://``, ...) are only checked to accept a connection.
    """
    what = "Dask scheduler"
    host, port = _host_port(address, what, SCHEDULER_FIX)
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        reason = (
            f"no answer within {timeout:g} s"
            if isinstance(exc, TimeoutError)
            else (exc.strerror or str(exc))
        )
        raise ClusterUnreachableError(
            f"{what} at {address!r} is unreachable ({reason}); {SCHEDULER_FIX}"
        ) from None
    scheme = address.split("://", 1)[0] if "://" in address else "tcp"
    with sock:
        if scheme != "tcp":
            return
        problem = _handshake_problem(sock, deadline, timeout)
    if problem:
        raise ClusterUnreachableError(
            f"{address!r} does not answer as a Dask scheduler ({problem}); {SCHEDULER_FIX}"
        )


def _recv(sock: socket.socket, n: int, deadline: float) -> bytes:
    """Up to ``n`` bytes (fewer if the peer closes); ``TimeoutError`` past ``deadline``."""
    data = b""
    while len(data) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _handshake_problem(sock: socket.socket, deadline: float, timeout: float) -> str | None:
    """Why what the peer sends first is not a Dask handshake (None if it is one)."""
    try:
        head = _recv(sock, 8, deadline)
        if len(head) < 8:
            return "it closed the connection without a Dask handshake"
        (n,) = struct.unpack("Q", head)
        if not 0 < n <= _MAX_HANDSHAKE:
            return f"it answered {head!r}, not a Dask handshake"
        body = _recv(sock, n, deadline)
    except TimeoutError:
        return f"no Dask handshake within {timeout:g} s"
    except OSError as exc:
        return f"the connection failed: {exc.strerror or exc}"
    try:
        from distributed.protocol.core import loads
        from distributed.protocol.utils import unpack_frames

        msg = loads(unpack_frames(body), deserialize=False)
    except Exception:
        return f"it answered {head!r}..., not a Dask handshake"
    if not (isinstance(msg, dict) and "compression" in msg):
        return "its first message is not a Dask handshake"
    return None
