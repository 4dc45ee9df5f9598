"""A local Ray cluster for the tests: a head and a second node declaring four logical GPUs, on loopback.

On loopback of its own: `ray start` rewrites 127.0.0.1 to the host's address (Ray 2.60,
ray/_private/services.py `resolve_ip_for_localhost`) and its GCS, raylets and agents bind every interface,
so the cluster runs in a network namespace that has only `lo` (`unshare --net`), where the host's address
does not exist and Ray falls back to 127.0.0.1. Everything that talks to it (`ray start`, the dispatchers,
`wait_nodes`) enters that namespace with `nsenter`; the dispatchers reach PostgreSQL through its Unix socket.
`isolated=False` (bench/executor_load.py, whose server must be reached from outside) skips the namespace.

Started with `ray start` the way a deployment starts it (the node's flags come from `python -m app
ray-node-flags`, plus `--num-gpus 4`), in a temp dir of its own, and stopped by killing exactly the processes
started with that temp dir as COURSE_RAY_CLUSTER in their environment, which every process Ray starts inherits
(never `ray stop`, which stops every Ray on the machine). The environment, not the command line: Ray's dashboard
and runtime-env agents and its client-server proxy rename themselves (setproctitle), so a command-line match
misses them and they outlive the cluster. Processes in the cluster's namespace are killed with it too.
The head offers no CPUs or GPUs, so every task runs on the node, and killing the node's raylet is a lost host.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import ROOT, free_port
from tests.leftovers import alive, command_line, kill, pids_with_env

RAY = str(Path(os.sys.executable).parent / "ray")
CLUSTER_MARK = "COURSE_RAY_CLUSTER"  # in the environment of every process of one cluster: its temp dir
LOGICAL_GPUS = 4
# The node's own per-job memory budget, set on the node only (as docker-compose sets it on ray-gpu): the dispatchers
# keep their host's default, so a test can tell whose budget a lab ran under.
NODE_JOB_MEMORY_MB = 3072


def pids_with(*texts: str) -> list[int]:
    """Processes (other than this one) whose command line holds every one of `texts`."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if all(t in cmd for t in texts):
            out.append(int(entry.name))
    return out


def _namespace() -> subprocess.Popen:
    """A process holding a network namespace with only loopback, up; entered through /proc/PID/ns/net."""
    if os.geteuid() != 0:
        raise RuntimeError("the Ray tests run their cluster in a network namespace of its own: run them as root")
    holder = subprocess.Popen(
        ["unshare", "--net", "sh", "-c", "ip link set lo up && echo up && exec sleep 86400"],
        stdout=subprocess.PIPE,
        text=True,
    )
    if holder.stdout is None or holder.stdout.readline().strip() != "up":
        holder.kill()
        raise RuntimeError("could not make a network namespace for the Ray cluster (unshare --net, ip link)")
    return holder


@dataclass
class RayCluster:
    base: Path
    port: int
    node_flags: list[str]
    env: dict
    holder: subprocess.Popen | None = None  # the network namespace's process; None: the host's network
    node_ports: dict = field(default_factory=dict)
    # worker port ranges below the kernel's ephemeral range (32768+), so free_port() never hands one out
    worker_ports: int = field(default_factory=lambda: 20000 + (os.getpid() % 100) * 120)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def node_data(self) -> Path:
        return self.base / "node-data"

    @property
    def enter(self) -> list[str]:
        """The command prefix that runs a command inside the cluster's network namespace."""
        return ["nsenter", f"--net=/proc/{self.holder.pid}/ns/net", "--"] if self.holder else []

    def _run(self, args: list[str], env: dict) -> None:
        out = subprocess.run([*self.enter, RAY, "start", *args], env=env, capture_output=True, text=True, timeout=180)
        if out.returncode != 0:
            raise RuntimeError(f"ray start {' '.join(args)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")

    def start_head(self) -> None:
        self._run(
            [
                "--head",
                "--node-ip-address=127.0.0.1",
                f"--port={self.port}",
                "--num-cpus=0",
                "--num-gpus=0",
                "--include-dashboard=false",
                "--disable-usage-stats",
                f"--temp-dir={self.base / 'ray'}",
                "--object-store-memory=100000000",
                f"--ray-client-server-port={free_port()}",
                f"--dashboard-agent-listen-port={free_port()}",
                f"--dashboard-agent-grpc-port={free_port()}",
                f"--runtime-env-agent-port={free_port()}",
                f"--metrics-export-port={free_port()}",
                f"--min-worker-port={self.worker_ports}",
                f"--max-worker-port={self.worker_ports + 40}",
            ],
            self.env,
        )

    def start_node(self, attempts: int = 2) -> None:
        """The 'GPU host': its own data dir, four logical GPUs, CPU slots from its probe.

        Ray 2.60's `ray start` gives a new raylet 30 s to register with the GCS (ray/_private/node.py, a constant no
        setting changes), and on a busy 2-core machine a node restarted after a kill once missed it. An attempt
        that fails is removed (its raylet and agents) and the node started once more on fresh ports; a second
        failure raises with the newest raylet log's tail."""
        for attempt in range(1, attempts + 1):
            try:
                return self._start_node()
            except RuntimeError as exc:
                port = self.node_ports["node_manager"]
                kill(pids_with(f"--node_manager_port={port}") + pids_with(f"--node-manager-port={port}"))
                if attempt == attempts:
                    raise RuntimeError(f"{exc}\n{self._raylet_log_tail()}") from None

    def _raylet_log_tail(self, chars: int = 3000) -> str:
        logs = sorted((self.base / "ray").glob("session_*/logs/raylet*"), key=lambda f: f.stat().st_mtime)
        return "\n".join(f"--- {f.name}\n{f.read_text(errors='replace')[-chars:]}" for f in logs[-2:])

    def _start_node(self) -> None:
        self.node_ports = {"node_manager": free_port()}
        lo = self.worker_ports + 50
        env = dict(self.env, COURSE_NODE_DATA_DIR=str(self.node_data), COURSE_JOB_MEMORY_MB=str(NODE_JOB_MEMORY_MB))
        self._run(
            [
                f"--address={self.address}",
                "--node-ip-address=127.0.0.1",
                *self.node_flags,
                f"--num-gpus={LOGICAL_GPUS}",
                "--disable-usage-stats",
                "--object-store-memory=100000000",
                f"--node-manager-port={self.node_ports['node_manager']}",
                f"--object-manager-port={free_port()}",
                f"--metrics-export-port={free_port()}",
                f"--dashboard-agent-listen-port={free_port()}",
                f"--dashboard-agent-grpc-port={free_port()}",
                f"--runtime-env-agent-port={free_port()}",
                f"--min-worker-port={lo}",
                f"--max-worker-port={lo + 60}",
            ],
            env,
        )

    def node_raylet_pids(self) -> list[int]:
        return [
            p
            for p in pids_with(f"--node_manager_port={self.node_ports['node_manager']}")
            if "raylet" in Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        ]

    def kill_node(self) -> None:
        """SIGKILL of the node's raylet: the host is gone, its workers and labs with it."""
        kill(self.node_raylet_pids())

    def wait_nodes(self, gpus: int, timeout: float = 120) -> None:
        """Until the cluster reports `gpus` GPUs alive (a killed node drops out after Ray's health checks)."""
        deadline = time.monotonic() + timeout
        code = (
            "import ray,sys; ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False);"
            "print(sum(n['Resources'].get('GPU',0) for n in ray.nodes() if n['Alive']))"
        )
        while time.monotonic() < deadline:
            out = subprocess.run(
                [*self.enter, os.sys.executable, "-c", code, self.address],
                env=self.env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            # compared as numbers: with no GPU node alive the sum is the int 0, printed "0"
            last = out.stdout.split()[-1:] if out.returncode == 0 else []
            if last and last[0].replace(".", "", 1).isdigit() and float(last[0]) == gpus:
                return
            time.sleep(1)
        raise AssertionError(f"the Ray cluster did not reach {gpus} GPUs alive in {timeout} s")

    def pids(self) -> list[int]:
        """Every live process of the cluster: started with its marker, naming its temp dir, or in its namespace."""
        found = set(pids_with_env(CLUSTER_MARK, str(self.base))) | set(pids_with(str(self.base)))
        if self.holder is not None:
            found |= set(_in_namespace(self.holder.pid)) - {self.holder.pid}
        return sorted(p for p in found if alive(p))

    def stop(self, timeout: float = 20) -> None:
        """SIGKILL every process of the cluster until none is left (a dying raylet may still be starting a worker);
        raises naming them if some outlive `timeout`."""
        deadline = time.monotonic() + timeout
        while (left := self.pids()) and time.monotonic() < deadline:
            kill(left)
            time.sleep(0.3)
        if self.holder is not None:
            self.holder.kill()
            self.holder.wait()
        shutil.rmtree(self.base, ignore_errors=True)  # Ray's session logs and sockets, ~1 MB a run
        if left:
            raise RuntimeError("Ray processes outlived stop(): " + "; ".join(f"{p} {command_line(p)}" for p in left))


def _in_namespace(holder_pid: int) -> list[int]:
    """Processes in the network namespace of `holder_pid` (entered with nsenter, or started inside it)."""
    try:
        ns = os.readlink(f"/proc/{holder_pid}/ns/net")
    except OSError:
        return []
    found = []
    for d in os.scandir("/proc"):
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if os.readlink(f"/proc/{d.name}/ns/net") == ns:
                    found.append(int(d.name))
            except OSError:
                continue
    return found


def start_cluster(isolated: bool = True) -> RayCluster:
    base = Path(tempfile.mkdtemp(prefix="cr-", dir="/tmp"))  # short: Ray's socket paths must fit 107 bytes
    env = dict(
        os.environ,
        RAY_USAGE_STATS_ENABLED="0",
        **{CLUSTER_MARK: str(base)},
        PYTHONPATH=str(ROOT),
        # a lost node is noticed in ~3 s instead of Ray's default ~15 s (GCS health checks; ray_config_def.h)
        RAY_health_check_period_ms="1000",
        RAY_health_check_failure_threshold="3",
        RAY_health_check_initial_delay_ms="1000",
    )
    env.pop("RAY_ADDRESS", None)
    flags = subprocess.run(
        [os.sys.executable, "-m", "app", "ray-node-flags"],
        cwd=ROOT,
        env=dict(env, COURSE_JOB_MEMORY_MB=str(NODE_JOB_MEMORY_MB)),  # as on the node: its flags name its budget
        capture_output=True,
        text=True,
        timeout=300,
    )
    if flags.returncode != 0:
        raise RuntimeError(f"python -m app ray-node-flags failed: {flags.stderr}")
    # the flags are printed for a shell; here each one is one argv item
    node_flags = [f.strip("'") for f in flags.stdout.split()]
    cluster = RayCluster(base=base, port=free_port(), node_flags=node_flags, env=env)
    try:
        cluster.holder = _namespace() if isolated else None
        cluster.start_head()
        cluster.start_node()
    except BaseException:
        cluster.stop()
        raise
    return cluster
