"""Hosts of their own on this machine: network namespaces, each with its own address on one bridge
(the traffic stays on this machine). Creating them needs the right to make namespaces and links
(root, or ``CAP_NET_ADMIN`` and ``CAP_SYS_ADMIN``): :func:`can_make_hosts` says whether this
process has it."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

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
