"""Emulated nodes on one Linux host: one network namespace per node, joined through a switch namespace by veth
pairs whose node-side and switch-side ends carry a `tc` bandwidth limit (tbf; netem for added latency where the
kernel has it). Ranks of one node share its namespace and talk over its loopback (fast, "NVLink"); ranks of
different nodes cross the veths (slow, "the NIC"), so each node's egress is one rate-limited link.

    with emulated_nodes(nodes=2, rate_mbit=400, delay_ms=0) as topo:   # topo.ok False: see topo.why
        launch(fn, ..., args=(topo.plan(ranks_per_node), ...))          # each rank calls join(plan[rank])

Cleanup is guaranteed four ways: the context manager's `finally`, an atexit hook plus a SIGTERM handler that
turns the signal into SystemExit (so the `finally` runs), `release(pid)`, which the executor that started the lab
calls once the lab's process group is gone (app/executors/labproc.py, through labs.api), and a sweep at every
start that deletes namespaces left by a process that no longer exists (SIGKILL cannot be caught). Deleting a
namespace destroys its veths, and a veth its qdiscs; the bridge lives in the switch namespace. Everything is
named by the creating process's pid, so whose it is can be told: namespaces `lcol-<pid>-<n>-<role>`, veths
`c<pid in hex><n % 256 in 2 hex digits>n<node><a|b>` (a veth is in the host's namespace only for the moment
between its creation and its move into a node's).

Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2's `ip` and `tc`; without them `ok` is False and
`why` says which step was refused, and the lab runs flat.
"""

from __future__ import annotations

import atexit
import itertools
import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

PREFIX = "lcol-"
SUBNET = "10.233.0"  # private to the run's own switch namespace, so concurrent runs never clash
CLONE_NEWNET = 0x40000000
_counter = itertools.count()
_live: set[str] = set()  # namespaces this process created and has not yet deleted
_lock = threading.Lock()


class TopologyUnavailable(RuntimeError):
    pass


@dataclass
class Topology:
    ok: bool
    why: str  # what was built, or why nothing was
    nodes: int = 1
    rate_mbit: float | None = None
    delay_ms: float | None = None
    delay_applied: bool = False
    node_ns: list[str] = field(default_factory=list)
    ifaces: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # every namespace, switch included

    def plan(self, ranks_per_node: int) -> list[dict | None]:
        """Per rank: the namespace to join and the interface gloo must use (None on a flat run)."""
        if not self.ok:
            return [None] * (self.nodes * ranks_per_node)
        return [
            {"netns": self.node_ns[r // ranks_per_node], "iface": self.ifaces[r // ranks_per_node]}
            for r in range(self.nodes * ranks_per_node)
        ]


def _sh(*args: str) -> None:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=20)
    if proc.returncode:
        raise TopologyUnavailable(f"`{' '.join(args)}` failed: {proc.stderr.strip() or proc.returncode}")


def list_namespaces() -> list[str]:
    if shutil.which("ip") is None:
        return []
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=20).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _delete(name: str) -> None:
    subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=20)
    with _lock:
        _live.discard(name)


def sweep_stale() -> list[str]:
    """Delete lab namespaces whose creating process is gone; the names deleted."""
    gone = []
    for name in list_namespaces():
        if not name.startswith(PREFIX):
            continue
        try:
            pid = int(name[len(PREFIX) :].split("-")[0])
        except ValueError:
            continue
        try:
            os.kill(pid, 0)
            continue  # still alive: its own cleanup owns it
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        _delete(name)
        gone.append(name)
    return gone


def _veth_pattern(pid: int) -> re.Pattern[str]:
    # pid in hex has no leading zero and exactly two hex digits follow it, so no other pid's names match
    return re.compile(rf"c{pid:x}[0-9a-f]{{2}}n\d+[ab]")


def leftovers(pid: int) -> list[str]:
    """What process `pid` made and has not deleted: its namespaces, and veths of its still in the host's
    namespace. Read from /run/netns and /sys/class/net, without running anything."""
    prefix = f"{PREFIX}{pid}-"
    try:
        names = [n for n in os.listdir("/run/netns") if n.startswith(prefix)]
    except OSError:
        names = []
    veth = _veth_pattern(pid)
    try:
        names += [n for n in os.listdir("/sys/class/net") if veth.fullmatch(n)]
    except OSError:
        pass
    return sorted(names)


def release(pid: int) -> list[str]:
    """Delete what lab process `pid` left behind (call it once that process and its ranks are gone: a namespace
    a live process sits in only disappears when it leaves); the names deleted. Touches nothing of another pid's."""
    gone = []
    for name in leftovers(pid):
        if name.startswith(PREFIX):
            _delete(name)
        else:
            subprocess.run(["ip", "link", "del", name], capture_output=True, timeout=20)  # its peer goes with it
        gone.append(name)
    return gone


def _cleanup_all() -> None:
    with _lock:
        names = list(_live)
    for name in names:
        _delete(name)


atexit.register(_cleanup_all)


def _install_sigterm() -> Any:
    """SIGTERM -> SystemExit in the main thread so `finally` blocks delete the namespaces; the old handler back."""
    if threading.current_thread() is not threading.main_thread():
        return None
    old = signal.getsignal(signal.SIGTERM)
    if old not in (signal.SIG_DFL, None):
        return None  # someone else handles it (and exits through Python): leave theirs alone

    def _term(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _term)
    return old


def _qdisc(ns: str, dev: str, rate_mbit: float, delay_ms: float) -> bool:
    """Rate-limit `dev` (and delay it where netem exists); whether the delay was applied."""
    # tbf's bucket must hold what the link sends in a timer tick or two, and veth hands it 64 KiB GSO packets:
    # 5 ms of the rate (64 KiB at least). Measured on the 2-core worker at 800 Mbit/s: a 64 KiB bucket let a
    # 4 MiB flat all-reduce reach half the rate (116 ms), 500 kB all of it (63 ms, the egress model's 63 ms).
    # A full bucket would let a message smaller than it through at loopback speed, so a second bucket (peakrate,
    # one 64 KiB packet deep: mtu) caps the burst at 1.1x the rate: a 16 KiB all-reduce across a 20 Mbit/s link
    # then takes the model's 10 ms instead of 2.
    burst = max(65536, int(rate_mbit * 1e6 / 8 * 0.005))
    tbf = ["rate", f"{rate_mbit:g}mbit", "burst", str(burst), "latency", "100ms"]
    tbf += ["peakrate", f"{rate_mbit * 1.1:g}mbit", "mtu", "70000"]
    if delay_ms > 0:
        try:
            _sh("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "netem", "delay", f"{delay_ms:g}ms")
            _sh("tc", "-n", ns, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "tbf", *tbf)
            return True
        except TopologyUnavailable:
            subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], capture_output=True, timeout=20)
    _sh("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", *tbf)
    return False


def build(nodes: int, rate_mbit: float, delay_ms: float) -> Topology:
    """Create the namespaces (the caller must `teardown`); a flat Topology with the reason if not allowed."""
    if nodes < 2:
        return Topology(False, "one node: nothing to emulate", nodes=nodes)
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return Topology(False, f"iproute2's `{tool}` is not installed on this worker; ran flat", nodes=nodes)
    sweep_stale()
    tag = f"{PREFIX}{os.getpid()}-{next(_counter)}"
    topo = Topology(False, "", nodes=nodes, rate_mbit=rate_mbit, delay_ms=delay_ms)
    short = f"{os.getpid():x}{next(_counter) % 256:02x}"  # interface names: 15 characters at most (pid < 2**22)
    try:
        sw = f"{tag}-sw"
        _sh("ip", "netns", "add", sw)
        with _lock:
            _live.add(sw)
        topo.names.append(sw)
        _sh("ip", "-n", sw, "link", "add", "br0", "type", "bridge")
        _sh("ip", "-n", sw, "link", "set", "br0", "up")
        delays = []
        for k in range(nodes):
            ns = f"{tag}-n{k}"
            _sh("ip", "netns", "add", ns)
            with _lock:
                _live.add(ns)
            topo.names.append(ns)
            a, b = f"c{short}n{k}a", f"c{short}n{k}b"
            _sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
            _sh("ip", "link", "set", a, "netns", ns)
            _sh("ip", "link", "set", b, "netns", sw)
            _sh("ip", "-n", ns, "addr", "add", f"{SUBNET}.{k + 1}/24", "dev", a)
            _sh("ip", "-n", ns, "link", "set", a, "up")
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
            _sh("ip", "-n", sw, "link", "set", b, "master", "br0")
            _sh("ip", "-n", sw, "link", "set", b, "up")
            # A full-duplex NIC: the node's sends limited on its end, its receives on the switch's end.
            delays.append(_qdisc(ns, a, rate_mbit, delay_ms))
            _qdisc(sw, b, rate_mbit, 0)
            topo.node_ns.append(ns)
            topo.ifaces.append(a)
    except (TopologyUnavailable, subprocess.TimeoutExpired, OSError) as exc:
        teardown(topo)
        return Topology(False, f"could not build emulated nodes ({exc}); ran flat", nodes=nodes)
    topo.ok = True
    topo.delay_applied = delay_ms > 0 and all(delays)
    delay_note = (
        f", {delay_ms:g} ms added latency (netem)"
        if topo.delay_applied
        else (" (no added latency: this kernel has no netem qdisc)" if delay_ms > 0 else "")
    )
    topo.why = (
        f"{nodes} network namespaces joined through a bridge by veth pairs, each node's link limited to "
        f"{rate_mbit:g} Mbit/s each way (tc tbf){delay_note}; ranks of one node share its loopback"
    )
    return topo


def teardown(topo: Topology) -> None:
    for name in reversed(topo.names):
        _delete(name)
    topo.names.clear()


@contextmanager
def emulated_nodes(nodes: int, rate_mbit: float, delay_ms: float) -> Iterator[Topology]:
    old = _install_sigterm()
    topo = build(nodes, rate_mbit, delay_ms)
    try:
        yield topo
    finally:
        teardown(topo)
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def join(place: dict | None) -> None:
    """In a rank: move this thread (and the threads it starts) into its node's namespace and point gloo at the
    node's interface, before creating any process group that should use it. No-op on a flat run."""
    if place is None:
        return
    import ctypes

    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    fd = os.open(f"/run/netns/{place['netns']}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into {place['netns']}: {os.strerror(err)}")
    finally:
        os.close(fd)
    # torch/csrc/distributed/c10d/init.cpp (torch 2.13) reads GLOO_SOCKET_IFNAME each time a gloo group is made.
    os.environ["GLOO_SOCKET_IFNAME"] = place["iface"]
