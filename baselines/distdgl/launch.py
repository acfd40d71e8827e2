"""An emulated Dist-DGL cluster on one host: M machines x T trainers (+ S servers per machine).

What dgl's `tools/launch.py` does over ssh, done here with Linux namespaces:

* every machine gets a private mount namespace with its own tmpfs on /dev/shm, because each
  machine's main server puts its partition into shared memory under names derived from the graph
  name only, so two machines on one host would collide (the second server dies with SIGBUS);
* with `network="netns"` (the default) every machine also gets its own network namespace with an
  `eth0` at 10.200.0.<m+1>, joined by a bridge that lives in a namespace of its own (the "switch").
  DGL then finds each machine's id from its own address, and the bytes that cross `eth0` are the
  bytes a real cluster would send over its network. With `network="loopback"` all machines share the
  host's 127.0.0.1 and the trainers are told their machine id through FAKE_MACHINE_ID (see
  trainer.py); network bytes are then not measurable.
* with `shape` (a netem.LinkShape: `baseline.network_emulation: emulated`, `rate` or `auto`) every
  machine's `eth0` is shaped with tc to a profile's NIC (delay and rate, or the rate alone;
  netem.py), and `tc qdisc show` read back from inside each namespace goes into the result. Every netns run probes whether the kernel can shape
  (sch_netem, sch_tbf) and says so in its result; an emulation it cannot do fails before any
  process starts.

Servers and trainers are started with `nsenter` into their machine's namespaces, each in a process
group of its own and with PR_SET_PDEATHSIG, so they die with the launcher even if it is killed.
Cleanup on every exit path: the process groups are killed, the namespace holders are killed, and
the kernel then frees the namespaces, their tmpfs (all shared-memory segments) and the veths.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from lsm_gnn.utils.errors import DistributedError, InputError
from lsm_gnn.utils.threads import thread_env

SUBNET = "10.200.0"
SERVER_PORT = 30050
MASTER_PORT = 29500
PR_SET_PDEATHSIG = 1


@dataclass
class ClusterSpec:
    machines: int = 2
    trainers: int = 2              # trainers per machine
    servers: int = 1               # servers per machine
    samplers: int = 0              # sampler processes per trainer (0: sample in the trainer)
    network: str = "netns"         # "netns" (own address per machine) or "loopback"
    timeout_s: float = 600.0
    shm_size: str = "50%"          # size of each machine's private /dev/shm tmpfs
    shape: object | None = None    # a netem.LinkShape for every machine's eth0 (None: links as they are)

    def __post_init__(self):
        if self.machines < 1 or self.trainers < 1 or self.servers < 1 or self.samplers < 0:
            raise InputError(f"cluster needs machines, trainers, servers >= 1 and samplers >= 0, found "
                             f"{self.machines}, {self.trainers}, {self.servers}, {self.samplers}")
        if self.network not in ("netns", "loopback"):
            raise InputError(f"network must be 'netns' or 'loopback', not {self.network!r}")
        if self.shape is not None and self.network != "netns":
            raise InputError("an emulated network shapes each machine's eth0: it needs network 'netns'")

    @property
    def world_size(self) -> int:
        return self.machines * self.trainers


@dataclass
class ClusterResult:
    trainer_metrics: list[dict]     # one per trainer rank, in rank order
    wall_s: float
    network: str
    logs_dir: Path
    processes: list[int] = field(default_factory=list)  # every pid started (all reaped on return)
    network_emulation: dict | None = None  # netns: the probe, the shape and each machine's qdiscs read back
    server_metrics: list[dict] = field(default_factory=list)  # the emulated testbed: each server's charges


def _pdeathsig():
    """In the child before exec: die when the launcher dies, even by SIGKILL."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _check_tools():
    if os.geteuid() != 0:
        raise DistributedError(None, "the Dist-DGL emulation needs root for mount/network namespaces "
                                     "(unshare -m [-n]); run as root or inside a container that allows it")
    for tool in ("unshare", "nsenter", "mount"):
        if not any((Path(p) / tool).exists() for p in os.environ.get("PATH", "/usr/bin:/bin").split(":")):
            raise DistributedError(None, f"`{tool}` (util-linux) is needed for the Dist-DGL emulation")


def _free_port_block(n: int) -> int:
    """A base port with n consecutive free ports on 127.0.0.1."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n >= 65535:
            continue
        ok = True
        for p in range(base, base + n):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise DistributedError(None, f"no block of {n} free ports on 127.0.0.1")


class EmulatedCluster:
    """Owns every process of one run; use as a context manager so cleanup always happens."""

    def __init__(self, spec: ClusterSpec, workdir: str | os.PathLike):
        self.spec = spec
        self.workdir = Path(workdir)
        self.logs = self.workdir / "logs"
        self.metrics_dir = self.workdir / "metrics"
        self.procs: list[tuple[str, subprocess.Popen]] = []   # (name, process)
        self.holders: list[subprocess.Popen] = []
        self.switch: subprocess.Popen | None = None
        self._log_files = []
        self.qdiscs: list[str] = []   # `tc qdisc show dev eth0` of each machine, after shaping

    # ---- namespaces ----------------------------------------------------------------------
    def _holder(self, args: list[str]) -> subprocess.Popen:
        """A `sleep` that keeps namespaces alive; returns once they exist (it printed 'ready')."""
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                             preexec_fn=_pdeathsig, start_new_session=True)
        line = p.stdout.readline().decode().strip()
        if line != "ready":
            err = p.stderr.read().decode() if p.poll() is not None else ""
            p.kill()
            p.wait()
            raise DistributedError(None, f"could not create namespaces with {' '.join(args[:6])}...: "
                                         f"{err.strip() or line or 'no output'}")
        return p

    def _nsrun(self, pid: int, *cmd: str, net: bool = True) -> str:
        flags = ["-n"] if net else []
        r = subprocess.run(["nsenter", "-t", str(pid), *flags, "--", *cmd], capture_output=True, text=True)
        if r.returncode != 0:
            raise DistributedError(None, f"network setup `{' '.join(cmd)}` failed: {r.stderr.strip()}")
        return r.stdout

    def _make_namespaces(self):
        spec = self.spec
        netns = spec.network == "netns"
        if netns:
            self.switch = self._holder(["unshare", "-n", "--", "sh", "-c", "echo ready; exec sleep infinity"])
            self._nsrun(self.switch.pid, "ip", "link", "set", "lo", "up")
            self._nsrun(self.switch.pid, "ip", "link", "add", "br0", "type", "bridge")
            self._nsrun(self.switch.pid, "ip", "link", "set", "br0", "up")
        mount = f"mount -t tmpfs -o size={spec.shm_size} lsmgnn-shm /dev/shm"
        for m in range(spec.machines):
            args = ["unshare", "-m", *(["-n"] if netns else []), "--propagation", "private", "--",
                    "sh", "-c", f"{mount} && echo ready && exec sleep infinity"]
            h = self._holder(args)
            self.holders.append(h)
            if netns:
                self._nsrun(self.switch.pid, "ip", "link", "add", f"m{m}", "type", "veth", "peer", "name", "eth0",
                            "netns", str(h.pid))
                self._nsrun(self.switch.pid, "ip", "link", "set", f"m{m}", "master", "br0")
                self._nsrun(self.switch.pid, "ip", "link", "set", f"m{m}", "up")
                self._nsrun(h.pid, "ip", "link", "set", "lo", "up")
                self._nsrun(h.pid, "ip", "addr", "add", f"{SUBNET}.{m + 1}/24", "dev", "eth0")
                self._nsrun(h.pid, "ip", "link", "set", "eth0", "up")
                if spec.shape is not None:
                    from baselines.distdgl import netem

                    self.qdiscs.append(netem.apply(self._nsrun, h.pid, spec.shape))

    # ---- processes -----------------------------------------------------------------------
    def _start(self, name: str, machine: int, env: dict, argv: list[str]) -> subprocess.Popen:
        netns = self.spec.network == "netns"
        holder = self.holders[machine].pid
        cmd = ["nsenter", "-t", str(holder), "-m", *(["-n"] if netns else []), "--", *argv]
        log = open(self.logs / f"{name}.log", "wb")
        self._log_files.append(log)
        p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             preexec_fn=_pdeathsig, start_new_session=True, cwd=str(self.workdir))
        self.procs.append((name, p))
        return p

    def _log_tail(self, name: str, lines: int = 25) -> str:
        try:
            return "\n".join((self.logs / f"{name}.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def run(self, part_config: str, graph_name: str, trainer_args: dict, progress: bool = False) -> ClusterResult:
        spec = self.spec
        self.logs.mkdir(parents=True, exist_ok=True)
        self.metrics_dir.mkdir(parents=True, exist_ok=True)
        _check_tools()
        netns = spec.network == "netns"
        emulation = None
        if netns:
            from baselines.distdgl import netem

            found = netem.probe()
            if spec.shape is not None:
                # the shape this kernel can do (auto without sch_netem: the rate alone), or a refusal
                spec.shape = netem.fit(spec.shape, found)
                netem.check(spec.shape, found)
            emulation = {"mode": spec.shape.mode if spec.shape is not None else "real", "available": found,
                         "shape": spec.shape.as_record() if spec.shape is not None else None}
        t_start = time.perf_counter()
        self._make_namespaces()
        if emulation is not None:
            emulation["qdiscs"] = list(self.qdiscs)

        ip_config = self.workdir / "ip_config.txt"
        if netns:
            ips = [(f"{SUBNET}.{m + 1}", SERVER_PORT) for m in range(spec.machines)]
            master = (f"{SUBNET}.1", MASTER_PORT)
        else:
            ips = [("127.0.0.1", _free_port_block(spec.servers)) for _ in range(spec.machines)]
            master = ("127.0.0.1", _free_port_block(1))
        ip_config.write_text("".join(f"{ip} {port}\n" for ip, port in ips))
        args_path = self.workdir / "trainer_args.json"
        args_path.write_text(json.dumps({**trainer_args, "graph_name": graph_name, "part_config": str(part_config),
                                         "ip_config": str(ip_config), "metrics_dir": str(self.metrics_dir),
                                         "network": spec.network}, indent=2))

        tot_clients = spec.trainers * (1 + spec.samplers) * spec.machines
        base = {k: v for k, v in os.environ.items() if not k.startswith(("DGL_", "RANK", "LOCAL_RANK", "WORLD_SIZE",
                                                                          "MASTER_"))}
        common = {**base, "DGLBACKEND": "pytorch", "DGL_NUM_SAMPLER": str(spec.samplers),
                  "DGL_NUM_CLIENT": str(tot_clients), "DGL_CONF_PATH": str(part_config),
                  "DGL_IP_CONFIG": str(ip_config), "DGL_NUM_SERVER": str(spec.servers),
                  "DGL_GRAPH_FORMAT": "csc", "PYTHONUNBUFFERED": "1"}
        entry = [sys.executable, "-m", "baselines.distdgl.trainer", str(args_path)]
        # servers sample on one thread; the native libraries of every process get the thread count
        # its torch runs with, whatever the caller's environment says (lsm_gnn/utils/threads.py)
        trainer_threads = int(trainer_args.get("threads") or 1)
        for m in range(spec.machines):
            for s in range(spec.servers):
                env = {**common, **thread_env(1), "DGL_ROLE": "server",
                       "DGL_SERVER_ID": str(m * spec.servers + s), "DGL_KEEP_ALIVE": "0"}
                self._start(f"server-m{m}-s{s}", m, env, entry)
        trainers = []
        for m in range(spec.machines):
            for t in range(spec.trainers):
                rank = m * spec.trainers + t
                env = {**common, **thread_env(trainer_threads), "DGL_DIST_MODE": "distributed",
                       "DGL_ROLE": "client", "DGL_GROUP_ID": "0",
                       "RANK": str(rank), "LOCAL_RANK": str(t), "WORLD_SIZE": str(spec.world_size),
                       "MASTER_ADDR": master[0], "MASTER_PORT": str(master[1]),
                       "LSM_MACHINE_ID": str(m)}
                if netns:
                    env["GLOO_SOCKET_IFNAME"] = "eth0"  # else gloo advertises the hostname's 127.0.0.1
                else:
                    env["FAKE_MACHINE_ID"] = str(m)
                trainers.append((rank, self._start(f"trainer-r{rank}", m, env, entry)))

        self._wait(trainers, t_start)
        metrics = []
        for rank, _ in trainers:
            path = self.metrics_dir / f"rank{rank}.json"
            if not path.is_file():
                raise DistributedError(rank, f"trainer exited 0 but wrote no metrics ({path})\n"
                                             f"{self._log_tail(f'trainer-r{rank}')}")
            metrics.append(json.loads(path.read_text()))
        servers = self._server_metrics(spec) if trainer_args.get("testbed") else []
        return ClusterResult(server_metrics=servers, trainer_metrics=metrics, wall_s=time.perf_counter() - t_start, network=spec.network,
                             logs_dir=self.logs, processes=[p.pid for _, p in self.procs],
                             network_emulation=emulation)

    def _wait(self, trainers, t_start):
        """Until every trainer exits 0; a failed or hung process fails the whole run."""
        spec = self.spec
        while True:
            codes = {rank: p.poll() for rank, p in trainers}
            failed = [r for r, c in codes.items() if c not in (None, 0)]
            if failed:
                time.sleep(0.5)  # peers of a dead trainer fail too: let them land, then blame the cause
                codes = {rank: p.poll() for rank, p in trainers}
                failed = [r for r, c in codes.items() if c not in (None, 0)]
                killed = [r for r in failed if codes[r] < 0]
                rank = min(killed or failed)
                rc = codes[rank]
                why = f"killed by signal {-rc}" if rc < 0 else f"exit code {rc}"
                raise DistributedError(rank, f"Dist-DGL trainer failed ({why}); log tail:\n"
                                             f"{self._log_tail(f'trainer-r{rank}')}")
            if all(c == 0 for c in codes.values()):
                return
            for name, p in self.procs:
                if name.startswith("server") and p.poll() not in (None, 0):
                    raise DistributedError(None, f"Dist-DGL {name} died (rc {p.returncode}) while trainers ran; "
                                                 f"log tail:\n{self._log_tail(name)}")
            if time.perf_counter() - t_start > spec.timeout_s:
                raise DistributedError(None, f"Dist-DGL run exceeded its timeout of {spec.timeout_s:.0f} s")
            time.sleep(0.1)

    def _server_metrics(self, spec: ClusterSpec, grace_s: float = 15.0) -> list[dict]:
        """The servers' charges (the emulated testbed), written when each exits: the servers exit
        once every trainer has disconnected, so they are waited for (`grace_s` at most)."""
        deadline = time.monotonic() + grace_s
        for name, p in self.procs:
            if name.startswith("server") and p.poll() is None:
                try:
                    p.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        out = []
        for i in range(spec.machines * spec.servers):
            path = self.metrics_dir / f"server{i}.json"
            if not path.is_file():
                raise DistributedError(None, f"server {i} wrote no testbed charges ({path}): the servers' work "
                                             "would go uncharged\n" + self._log_tail(f"server-m{i // spec.servers}-s"
                                                                                   f"{i % spec.servers}"))
            out.append(json.loads(path.read_text()))
        return out

    # ---- cleanup -------------------------------------------------------------------------
    def close(self, grace_s: float = 10.0):
        """Servers normally exit once every trainer has disconnected; whatever is left is killed."""
        deadline = time.monotonic() + grace_s
        for _, p in self.procs:
            if p.poll() is None:
                try:
                    p.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        for p in [p for _, p in self.procs] + self.holders + ([self.switch] if self.switch else []):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:  # pragma: no cover - a process stuck in the kernel
                pass
        for f in self._log_files:
            f.close()
        self._log_files.clear()

    def kill_now(self):
        """Kill everything at once (used on failure, where waiting for servers is pointless)."""
        for _, p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.close(grace_s=0.0)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.kill_now()


def run_cluster(spec: ClusterSpec, part_config: str, graph_name: str, trainer_args: dict,
                workdir: str | os.PathLike, progress: bool = False) -> ClusterResult:
    """Start the cluster, wait for the trainers, clean up (also on errors and Ctrl-C)."""
    with EmulatedCluster(spec, workdir) as cluster:
        return cluster.run(part_config, graph_name, trainer_args, progress=progress)
