"""Hosts of their own on this machine: network namespaces, each with its own address on one bridge
(the traffic stays on this machine). Creating them needs the right to make namespaces and links
(root, or ``CAP_NET_ADMIN`` and ``CAP_SYS_ADMIN``): :func:`can_make_hosts` says whether this
process has it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the bridge's subnet (the submitting host is .1, the scheduler .10, the workers .11 and .12)
NET = "10.231.7"


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=60)


def can_make_hosts() -> str:
    """'' if this process may create network namespaces, else why not."""
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    probe = f"dpa-probe-{uuid.uuid4().hex[:6]}"
    try:
        ip("netns", "add", probe)
    except subprocess.CalledProcessError as exc:
        return f"cannot create a network namespace: {exc.stderr.decode().strip()}"
    ip("netns", "del", probe)
    return ""


@contextmanager
def hosts(names: list[str], net: str = NET) -> Iterator[dict[str, tuple[str, str]]]:
    """A bridge with address ``net``.1 here, and per name a namespace with address .10, .11, … on
    it: {name: (namespace, address)}; all removed at the end."""
    tag = uuid.uuid4().hex[:5]
    bridge = f"dpb{tag}"
    made: dict[str, tuple[str, str]] = {}
    ip("link", "add", bridge, "type", "bridge")
    try:
        ip("addr", "add", f"{net}.1/24", "dev", bridge)
        ip("link", "set", bridge, "up")
        for k, name in enumerate(names):
            ns, addr = f"dpa-{tag}-{name}", f"{net}.{10 + k}"
            here, there = f"dpv{tag}{k}", f"dpp{tag}{k}"
            ip("netns", "add", ns)
            made[name] = (ns, addr)
            ip("link", "add", here, "type", "veth", "peer", "name", there)
            ip("link", "set", there, "netns", ns)
            ip("link", "set", here, "master", bridge)
            ip("link", "set", here, "up")
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", there)
            ip("-n", ns, "link", "set", there, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        yield made
    finally:
        for ns, _ in made.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=60)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True, timeout=60)


@dataclass
class HostCluster:
    """A cluster started by :func:`cluster_on_hosts`: the Prefect API and its client, the
    scheduler's address, the workers joined (their addresses), the hosts {name: (netns, address)}
    and the processes."""

    api: str
    http: Any
    scheduler: str
    workers: list[str]
    hosts: dict[str, tuple[str, str]]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)


@contextmanager
def cluster_on_hosts(
    workdir: Path,
    env: dict[str, str],
    *,
    workers: int = 2,
    memory_limit: str = "4GiB",
    worker_env: dict[str, str] | None = None,
    net: str = NET,
    timeout: float = 300,
) -> Iterator[HostCluster]:
    """A Prefect server on the bridge's address (``net``.1), a Dask scheduler on a host of its own
    and ``workers`` Dask workers (1 thread, ``memory_limit``) on one host each, started as separate
    processes with ``env`` (the workers with ``worker_env`` over it), their logs in ``workdir``;
    every process stopped and every host removed at the end."""
    import httpx

    from tests.integration.test_serve import stop, wait_for

    bindir = Path(sys.executable).parent
    names = ["sched", *(f"w{k + 1}" for k in range(workers))]
    logs = {n: (workdir / f"{n}.log").open("wb") for n in ["server", *names]}
    procs: list[subprocess.Popen[bytes]] = []
    with hosts(names, net) as made:
        try:
            api = f"http://{net}.1:4200/api"
            server_env = {**env, "PREFECT_HOME": str(workdir / "prefect-home"),
                          "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}  # fmt: skip
            procs.append(subprocess.Popen(
                [str(bindir / "prefect"), "server", "start", "--host", f"{net}.1",
                 "--port", "4200"],
                cwd=workdir, env=server_env, stdout=logs["server"], stderr=subprocess.STDOUT,
            ))  # fmt: skip
            http = httpx.Client(base_url=api, timeout=10)
            wait_for("the server", lambda: http.get("/health").status_code == 200, timeout, procs)
            reporting = {**env, "PREFECT_API_URL": api}  # every process reports to it
            ns, addr = made["sched"]
            scheduler = f"tcp://{addr}:8786"
            procs.append(subprocess.Popen(
                ["ip", "netns", "exec", ns, str(bindir / "dask"), "scheduler", "--host", addr,
                 "--port", "8786", "--no-dashboard"],
                cwd=workdir, env=reporting, stdout=logs["sched"], stderr=subprocess.STDOUT,
            ))  # fmt: skip
            for w in names[1:]:
                ns, addr = made[w]
                procs.append(subprocess.Popen(
                    ["ip", "netns", "exec", ns, str(bindir / "dask"), "worker", scheduler,
                     "--host", addr, "--nthreads", "1", "--memory-limit", memory_limit,
                     "--no-dashboard"],
                    cwd=workdir, env={**reporting, **(worker_env or {})}, stdout=logs[w],
                    stderr=subprocess.STDOUT,
                ))  # fmt: skip

            def joined() -> list[str]:
                from distributed import Client

                with Client(scheduler, timeout=30, set_as_default=False) as client:
                    got = sorted(client.scheduler_info(n_workers=-1)["workers"])
                return got if len(got) == workers else []

            got = wait_for(f"{workers} workers", joined, timeout, procs)
            yield HostCluster(api, http, scheduler, got, made, procs)
        finally:
            for p in reversed(procs):
                stop(p)
            for log in logs.values():
                log.close()
