"""Hosts for the cluster tests: Linux network namespaces joined by a bridge.

Each :class:`Host` is a network namespace with its loopback up and one veth pair whose
other end is plugged into a bridge in the root namespace; the bridge itself has the
subnet's ``.1`` address, so the test process (in the root namespace) reaches every host
by IP, and the hosts reach each other and the test process through the bridge. Inside a
namespace ``127.0.0.1`` is that namespace's own loopback: a process there finds a server
of another host only at that host's address, as on separate machines. The filesystem is
shared (one machine), which is why the cluster tests keep their warehouse on S3.

Names carry this process's id and the subnet is one no route of the machine uses yet, so
two runs at once (another engineer's, an xdist worker) do not collide. :meth:`Network.close`
kills what still runs in each namespace (processes this test started there), deletes the
namespaces and the bridge, and is safe to call twice or after a half-built network.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Host", "NetnsUnavailable", "Network", "probe_netns"]

_SUBNET_BASE = "10.213"  # 10.213.X.0/24, X picked per run (see _free_subnet)


class NetnsUnavailable(RuntimeError):
    """This machine (or this user) cannot create network namespaces, bridges or veths."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``ip ARGS`` and return the result; raise :class:`NetnsUnavailable` on failure
    when ``check`` (the message carries ip's own error)."""
    try:
        done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    except FileNotFoundError as e:
        raise NetnsUnavailable("iproute2's `ip` is not installed") from e
    if check and done.returncode != 0:
        raise NetnsUnavailable(f"`ip {' '.join(args)}` failed: {done.stderr.strip()}")
    return done


def probe_netns() -> str | None:
    """``None`` when a network namespace can be created here, else the reason why not.

    Creates and deletes one namespace (the only honest probe: root alone is not enough in
    a container without CAP_SYS_ADMIN, and ``unshare`` may be forbidden by seccomp).
    """
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    name = f"asprobe{os.getpid()}"
    try:
        _ip("netns", "add", name)
    except NetnsUnavailable as e:
        return str(e)
    _ip("netns", "del", name, check=False)
    return None


@dataclass(frozen=True)
class Host:
    """One host: a network namespace with an address on the cluster's subnet.

    Attributes:
        name: The host's role name in the test (``a``, ``b``, ``c``, ``svc``).
        netns: The namespace's name (``ip netns``).
        ip: Its address on the bridge.
    """

    name: str
    netns: str
    ip: str

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside this host: ``ip netns exec NS argv`` (``ip`` execs the
        command, so the process id Popen reports is the command's own)."""
        return ["ip", "netns", "exec", self.netns, *argv]


def _free_subnet() -> ipaddress.IPv4Network:
    """A ``10.213.X.0/24`` that no route or address of the root namespace uses yet."""
    used = _ip("-4", "route", "show").stdout + _ip("-4", "addr", "show").stdout
    start = os.getpid() % 250
    for i in range(250):
        x = (start + i) % 250 + 1
        if f"{_SUBNET_BASE}.{x}." not in used:
            return ipaddress.IPv4Network(f"{_SUBNET_BASE}.{x}.0/24")
    raise NetnsUnavailable(f"no free {_SUBNET_BASE}.X.0/24 subnet")


class Network:
    """A bridge in the root namespace and one namespace per host name, built by
    :meth:`build` and removed by :meth:`close` (also when the build failed halfway).

    Args:
        names: The hosts' role names, in the order their addresses are given
            (``.11``, ``.12``, ...).
    """

    def __init__(self, names: Sequence[str]) -> None:
        self._names = list(names)
        tag = str(os.getpid() % 100000)
        self.tag = tag
        self.bridge = f"asbr{tag}"
        self.subnet: ipaddress.IPv4Network | None = None
        self.hosts: dict[str, Host] = {}
        self._made_netns: list[str] = []
        self._made_bridge = False

    @property
    def gateway(self) -> str:
        """The bridge's address: how the hosts reach the root namespace (the test)."""
        assert self.subnet is not None
        return str(self.subnet.network_address + 1)

    def build(self) -> Network:
        """Create the bridge, the namespaces and their veth pairs, all up.

        Raises:
            NetnsUnavailable: an ``ip`` command failed (its message says which).
        """
        self.subnet = _free_subnet()
        _ip("link", "add", self.bridge, "type", "bridge")
        self._made_bridge = True
        _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i, name in enumerate(self._names):
            ns = f"as{self.tag}-{name}"
            ip = str(self.subnet.network_address + 11 + i)
            _ip("netns", "add", ns)
            self._made_netns.append(ns)
            outer, inner = f"va{self.tag}{name}"[:15], f"vb{self.tag}{name}"[:15]
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", ns)
            _ip("link", "set", outer, "master", self.bridge)
            _ip("link", "set", outer, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "set", inner, "name", "eth0")
            _ip("-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            # Only the subnet is routed: a namespace has no default route, so nothing a
            # test runs can reach any address but the cluster's own.
            self.hosts[name] = Host(name=name, netns=ns, ip=ip)
        return self

    def close(self) -> None:
        """Kill what still runs in the namespaces, delete them and the bridge. Idempotent."""
        for ns in self._made_netns:
            pids = _ip("netns", "pids", ns, check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            # Deleting the namespace destroys its veth end, which destroys the pair.
            _ip("netns", "del", ns, check=False)
        self._made_netns.clear()
        if self._made_bridge:
            _ip("link", "del", self.bridge, check=False)
            self._made_bridge = False
        self.hosts.clear()
