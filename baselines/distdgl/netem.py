"""Dist-DGL's network, emulated: each emulated machine's link shaped to a profile's interconnect.

The machines of the emulated cluster (launch.py) live in network namespaces joined by a bridge;
unshaped, their veth pairs move bytes at the host's memory speed with microseconds of delay. With
`baseline.network_emulation: emulated` every machine's `eth0` gets the NIC of a hardware profile
(`baseline.network_profile`: a projection profile, lsm_gnn/project/profiles/, whose `links.nic` the
projection uses too, so the number is written once):

    tc qdisc replace dev eth0 root handle 1: netem delay D limit 100000   (when D > 0)
    tc qdisc replace dev eth0 parent 1:1 handle 10: tbf rate R burst B limit L
    (without a delay: tbf alone, as the root)

netem (the kernel's network emulator, sch_netem) holds every packet leaving the machine for D; tbf
(the token bucket filter, sch_tbf) lets at most R bytes per second leave it. A packet from machine a
to machine b leaves a's eth0 once, so a request and its answer see 2 D: D is half the profile's
`nic.latency_s`, which the projection counts per round trip (one TCP request and reply). Each
machine's egress is its NIC's send rate; with two machines one machine's send is the other's
receive, so shaping egress only shapes both directions once.

Time dilation (`time_scale` S; the lead wires `emulation.time_scale` to it): delays multiplied by S,
rates divided by S, so that a run at scale S is the profile's network seen S times slower (and the
host's CPU S times faster: Gupta et al., NSDI'06).

netem and tbf are kernel modules: `probe()` tries both in a scratch network namespace. A run that
asked for emulation on a kernel without them fails before any process starts, naming what is
missing; every netns run's record says what the probe found (`network_emulation.available`).

Kernels without sch_netem (this project's VM: a Firecracker kernel built with tbf and htb but no
netem, fq or taprio, so no qdisc can hold a packet for a time) still shape the rate: `rate` (or
`auto` there) puts tbf alone on eth0 and records the delay it could not add (`delay_missing_s`).
The run is then faster than the profile's network by at most that delay on each round trip, which
`missing_delay_per_epoch` turns into seconds per epoch with the projection's count of round trips
(lsm_gnn/project/model.py: distdgl_round_trips), so that a report can say whether the missing
delay could change what it concludes.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import asdict, dataclass, replace

from lsm_gnn.utils.errors import ConfigError, DistributedError

NETEM_LIMIT_PACKETS = 100_000
"""netem's queue in packets (its default of 1000 drops packets once delay x rate exceeds it)."""
MIN_BURST_BYTES = 256 * 1024
"""tbf's bucket at least four 64 KiB GSO packets of a veth (a bucket below one packet drops it)."""
BURST_S = 0.001
"""tbf's bucket otherwise holds 1 ms of the rate: bursts finer than that are smoothed."""
QUEUE_S = 0.05
"""tbf's queue holds 50 ms of the rate before it drops (TCP's pacing keeps it short)."""


@dataclass(frozen=True)
class LinkShape:
    """What one machine's eth0 is shaped to: its send rate and the one-way delay of a packet."""

    rate_bytes_per_s: float
    delay_s: float
    profile: str
    time_scale: float = 1.0
    delay_required: bool = True
    """False (`network_emulation: auto`): on a kernel without sch_netem shape the rate alone (fit())."""
    delay_missing_s: float = 0.0
    """The one-way delay (dilated, as delay_s) the profile asks for and this shape does not add."""

    @classmethod
    def from_profile(cls, name: str, time_scale: float = 1.0) -> "LinkShape":
        """The NIC of hardware profile `name` (packaged name or YAML path), dilated by `time_scale`:
        rate = links.nic.bandwidth / S, delay = links.nic.latency_s / 2 x S (one way of a round trip)."""
        from lsm_gnn.project.profiles import load_profile

        if not time_scale > 0:
            raise ConfigError("<config>", "emulation.time_scale", f"expected a positive scale, found {time_scale!r}")
        nic = load_profile(name).links.nic
        return cls(rate_bytes_per_s=nic.bandwidth / time_scale, delay_s=nic.latency_s / 2 * time_scale,
                   profile=str(name), time_scale=float(time_scale))

    @property
    def mode(self) -> str:
        """`emulated` (rate and delay), or `rate` (the delay the profile asks for not added)."""
        return "rate" if self.delay_missing_s > 0 else "emulated"

    def rate_only(self) -> "LinkShape":
        """The same rate, no delay added; the delay left out kept as `delay_missing_s`."""
        return replace(self, delay_s=0.0, delay_missing_s=self.delay_missing_s + self.delay_s)

    def missing_round_trip_s(self) -> float:
        """The round-trip delay left out, in the profile's own (undilated) seconds: the time a run's
        reported (divided back by the scale) round trip lacks."""
        return 2 * self.delay_missing_s / self.time_scale

    def tc_commands(self, dev: str = "eth0") -> list[list[str]]:
        """The `tc` invocations that put this shape on `dev` (replace: idempotent)."""
        rate_bits = max(8, int(round(self.rate_bytes_per_s * 8)))
        burst = max(MIN_BURST_BYTES, int(self.rate_bytes_per_s * BURST_S))
        limit = max(4 * burst, int(self.rate_bytes_per_s * QUEUE_S))
        tbf = ["tbf", "rate", f"{rate_bits}bit", "burst", str(burst), "limit", str(limit)]
        if self.delay_s <= 0:
            return [["tc", "qdisc", "replace", "dev", dev, "root", "handle", "10:", *tbf]]
        delay_us = max(1, int(round(self.delay_s * 1e6)))
        return [["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "netem", "delay", f"{delay_us}us",
                 "limit", str(NETEM_LIMIT_PACKETS)],
                ["tc", "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", "10:", *tbf]]

    def as_record(self) -> dict:
        return {**asdict(self), "mode": self.mode, "delay_round_trip_s": 2 * self.delay_s,
                "missing_round_trip_s": self.missing_round_trip_s()}


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True)


def probe() -> dict:
    """Whether this kernel shapes links: tc's netem and tbf qdiscs tried on `lo` of a scratch network
    namespace (`unshare -n`; needs root). {"available", "netem", "tbf", "reason"}."""
    out = {"netem": False, "tbf": False, "reason": None}
    try:
        for kind, args in (("netem", "netem delay 1ms"), ("tbf", "tbf rate 1gbit burst 262144 limit 1048576")):
            r = _run(["unshare", "-n", "--", "sh", "-c", f"ip link set lo up && tc qdisc add dev lo root {args}"])
            out[kind] = r.returncode == 0
            if r.returncode != 0 and out["reason"] is None:
                out["reason"] = (f"`tc qdisc add dev lo root {args}` in a scratch network namespace failed: "
                                 f"{(r.stderr or r.stdout).strip() or f'exit code {r.returncode}'}")
    except FileNotFoundError as e:  # no unshare / tc
        out["reason"] = f"{e.filename or e} not found (iproute2 and util-linux are needed)"
    out["available"] = out["netem"] and out["tbf"]
    return out


def fit(shape: LinkShape, found: dict) -> LinkShape:
    """The shape this kernel can put on a link (`found`: probe()): `shape` itself, or its rate
    alone where sch_netem is missing and the delay is not required (`network_emulation: auto`).
    check() then refuses what is still impossible."""
    if shape.delay_s > 0 and not found.get("netem") and not shape.delay_required:
        return shape.rate_only()
    return shape


def check(shape: LinkShape, found: dict) -> None:
    """Refuse an emulation the kernel cannot do (`found`: probe()), naming what is missing."""
    need = ["tbf"] + (["netem"] if shape.delay_s > 0 else [])
    missing = [k for k in need if not found.get(k)]
    if missing:
        raise DistributedError(None, f"baseline.network_emulation: emulated needs the kernel's "
                                     f"{' and '.join('sch_' + k for k in missing)} qdisc "
                                     f"({'delay' if 'netem' in missing else 'rate'} of profile "
                                     f"{shape.profile!r}'s NIC); {found.get('reason')}. Run with "
                                     "baseline.network_emulation=rate (tbf alone: the rate shaped, the "
                                     "delay left out and recorded) or real, or on a kernel with the module")


def apply(nsrun, pid: int, shape: LinkShape, dev: str = "eth0") -> str:
    """Shape `dev` in the network namespace of process `pid` (`nsrun(pid, *cmd)` runs a command
    there and raises on failure); returns `tc qdisc show dev DEV` read back from inside it, which
    must show the shape's qdiscs."""
    for cmd in shape.tc_commands(dev):
        nsrun(pid, *cmd)
    shown = nsrun(pid, "tc", "qdisc", "show", "dev", dev)
    want = ["tbf"] + (["netem"] if shape.delay_s > 0 else [])
    if not all(k in shown for k in want):
        raise DistributedError(None, f"the network emulation's qdiscs ({', '.join(want)}) are not on {dev} "
                                     f"after tc applied them: `tc qdisc show dev {dev}` says {shown.strip()!r}")
    return shown.strip()


def missing_delay_per_epoch(shape: dict | None, round_trips_per_iteration: int, iterations_per_epoch: int) -> float:
    """Seconds per epoch (undilated: the record's time) that a `rate` run lacks against the profile's
    network: its round trips per iteration x the round-trip delay left out x the iterations of an
    epoch. `shape`: a record's `network_emulation.shape` (None, or nothing missing: 0)."""
    if not shape:
        return 0.0
    return float(round_trips_per_iteration * (shape.get("missing_round_trip_s") or 0.0) * iterations_per_epoch)


def parse_rate(shown: str) -> float | None:
    """The tbf rate (bytes/s) in `tc qdisc show` output (tc prints e.g. `rate 800Mbit`)."""
    m = re.search(r"\btbf\b.*?\brate (\d+(?:\.\d+)?)([KMGT]?)bit", shown)
    if not m:
        return None
    mult = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[m.group(2)]
    return float(m.group(1)) * mult / 8


def parse_delay(shown: str) -> float | None:
    """The netem delay (seconds) in `tc qdisc show` output (`delay 10us`, `delay 1ms`, `delay 1s`)."""
    m = re.search(r"\bnetem\b.*?\bdelay (\d+(?:\.\d+)?)(us|ms|s)\b", shown)
    if not m:
        return None
    return float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(2)]


def round_trip_tolerance(delay_s: float) -> float:
    """How far a measured round trip may lie above 2 x delay: the veth and the socket's own
    ~50-100 us on a loaded VM, or 20 % of the delay, whichever is larger."""
    return max(2e-4, 0.2 * 2 * delay_s)

