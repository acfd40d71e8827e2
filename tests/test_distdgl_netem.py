"""Dist-DGL's emulated network: each machine's eth0 shaped with tc to a profile's NIC (rate and
delay), dilated by the time scale; the qdiscs read back from inside the namespaces; a measured TCP
stream and round trip against the configured rate and delay; an emulation the kernel cannot do
refused before anything starts, naming the missing module."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from baselines.distdgl import netem
from baselines.distdgl.launch import SUBNET, ClusterSpec, EmulatedCluster
from lsm_gnn.config import load_config
from lsm_gnn.project.profiles import load_profile
from lsm_gnn.utils.errors import ConfigError, DistributedError

ROOT = os.geteuid() == 0 and shutil.which("unshare") and shutil.which("nsenter") and shutil.which("tc")
needs_root = pytest.mark.skipif(not ROOT, reason="network namespaces and tc need root, unshare, nsenter, tc")


def test_the_shape_is_the_profiles_nic_with_delays_times_the_scale_and_rates_over_it():
    nic = load_profile("paper").links.nic
    one = netem.LinkShape.from_profile("paper")
    assert one.rate_bytes_per_s == nic.bandwidth and one.delay_s == pytest.approx(nic.latency_s / 2)
    four = netem.LinkShape.from_profile("paper", time_scale=4)
    assert four.rate_bytes_per_s == pytest.approx(nic.bandwidth / 4) and four.delay_s == pytest.approx(2 * nic.latency_s)
    assert four.as_record()["delay_round_trip_s"] == pytest.approx(4 * nic.latency_s)
    netem_cmd, tbf_cmd = four.tc_commands()
    assert netem_cmd[:9] == ["tc", "qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "netem"]
    assert netem_cmd[netem_cmd.index("delay") + 1] == f"{round(2 * nic.latency_s * 1e6)}us"
    assert tbf_cmd[tbf_cmd.index("rate") + 1] == f"{round(nic.bandwidth / 4 * 8)}bit" and "parent" in tbf_cmd
    # without a delay: tbf alone at the root
    (only,) = netem.LinkShape(1e6, 0.0, "x").tc_commands()
    assert "netem" not in only and only[5:9] == ["root", "handle", "10:", "tbf"]
    with pytest.raises(ConfigError, match="emulation.time_scale"):
        netem.LinkShape.from_profile("paper", time_scale=0)


def test_the_config_refuses_an_emulated_network_without_namespaces_or_with_an_unknown_profile():
    assert load_config(None, ["baseline.network_emulation=emulated"]).baseline.network_profile == "paper"
    with pytest.raises(ConfigError, match="network_emulation: emulated .* needs network: netns"):
        load_config(None, ["baseline.network_emulation=emulated", "baseline.network=loopback"])
    with pytest.raises(ConfigError, match="baseline.network_profile: .*unknown hardware profile"):
        load_config(None, ["baseline.network_profile=v100"])


def test_the_tc_output_is_read_back_to_rate_and_delay():
    shown = ("qdisc netem 1: root refcnt 2 limit 100000 delay 10us\n"
             "qdisc tbf 10: parent 1:1 rate 800Mbit burst 256Kb lat 1.3ms")
    assert netem.parse_delay(shown) == pytest.approx(1e-5) and netem.parse_rate(shown) == pytest.approx(1e8)
    assert netem.parse_delay("qdisc tbf 10: root rate 20Mbit burst 256Kb") is None


def test_an_emulation_the_kernel_cannot_do_is_refused_naming_the_missing_module(monkeypatch, tmp_path):
    monkeypatch.setattr(netem, "probe", lambda: {"available": False, "netem": False, "tbf": True,
                                                 "reason": "tc said: Error: Specified qdisc kind is unknown."})
    monkeypatch.setattr("baselines.distdgl.launch._check_tools", lambda: None)
    spec = ClusterSpec(machines=2, trainers=1, shape=netem.LinkShape.from_profile("paper"))
    with EmulatedCluster(spec, tmp_path) as cluster:
        with pytest.raises(DistributedError, match=r"needs the kernel's sch_netem qdisc \(delay of profile 'paper'.*"
                                                   r"Specified qdisc kind is unknown.*network_emulation=rate"):
            cluster.run("parts.json", "g", {})
        assert cluster.procs == [] and cluster.holders == []  # nothing started


def test_auto_takes_the_rate_alone_without_sch_netem_and_keeps_the_delay_it_left_out():
    nic = load_profile("paper").links.nic
    no_netem = {"available": False, "netem": False, "tbf": True, "reason": "no netem"}
    both = {"available": True, "netem": True, "tbf": True, "reason": None}
    auto = replace(netem.LinkShape.from_profile("paper", time_scale=8), delay_required=False)
    fitted = netem.fit(auto, no_netem)
    assert fitted.mode == "rate" and fitted.delay_s == 0.0 and fitted.rate_bytes_per_s == auto.rate_bytes_per_s
    assert fitted.delay_missing_s == pytest.approx(auto.delay_s)
    # the record's round trip left out is the profile's own (undilated: reported times are divided by S)
    assert fitted.as_record()["missing_round_trip_s"] == pytest.approx(nic.latency_s)
    (only,) = fitted.tc_commands()
    assert "netem" not in only and "tbf" in only
    netem.check(fitted, no_netem)  # tbf alone: nothing missing
    # a kernel with netem keeps the delay; `emulated` (delay required) never drops it
    assert netem.fit(auto, both) == auto and netem.fit(auto, both).mode == "emulated"
    strict = netem.LinkShape.from_profile("paper", time_scale=8)
    assert netem.fit(strict, no_netem) is strict
    with pytest.raises(DistributedError, match="sch_netem"):
        netem.check(strict, no_netem)
    # what a rate-only run lacks per epoch: round trips x the round trip left out x iterations
    assert netem.missing_delay_per_epoch(fitted.as_record(), 7, 100) == pytest.approx(700 * nic.latency_s)
    assert netem.missing_delay_per_epoch(auto.as_record(), 7, 100) == 0.0
    assert netem.missing_delay_per_epoch(None, 7, 100) == 0.0


def test_the_config_takes_rate_and_auto_and_the_harness_builds_their_shapes():
    from baselines.harness import network_shape

    assert network_shape(load_config(None, [])) is None
    rate = network_shape(load_config(None, ["baseline.network_emulation=rate"]), 4)
    assert rate.mode == "rate" and rate.delay_s == 0.0 and rate.rate_bytes_per_s == pytest.approx(
        load_profile("paper").links.nic.bandwidth / 4)
    auto = network_shape(load_config(None, ["baseline.network_emulation=auto"]), 4)
    assert auto.mode == "emulated" and not auto.delay_required
    assert network_shape(load_config(None, ["baseline.network_emulation=emulated"]), 4).delay_required
    with pytest.raises(ConfigError, match="network_emulation: rate .* needs network: netns"):
        load_config(None, ["baseline.network_emulation=rate", "baseline.network=loopback"])


# a TCP server in one machine's namespace and a client in the other's: a stream and ping-pongs
_SERVER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 30999)); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); mode = c.recv(1)
if mode == b"s":
    n = 0
    while True:
        b = c.recv(1 << 20)
        if not b: break
        n += len(b)
    c.sendall(str(n).encode())
else:
    while True:
        b = c.recv(1)
        if not b: break
        c.sendall(b)
"""
_CLIENT = """
import socket, sys, time, json
mode, n = sys.argv[1], int(sys.argv[2])
c = socket.create_connection((sys.argv[3], 30999)); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
c.sendall(mode.encode())
if mode == "s":
    buf = b"x" * (1 << 16); t0 = time.perf_counter(); sent = 0
    while sent < n:
        c.sendall(buf); sent += len(buf)
    c.shutdown(socket.SHUT_WR); got = int(c.recv(64)); print(json.dumps({"bytes": got, "s": time.perf_counter() - t0}))
else:
    rtts = []
    for _ in range(n):
        t0 = time.perf_counter(); c.sendall(b"x"); c.recv(1); rtts.append(time.perf_counter() - t0)
    print(json.dumps({"rtts": rtts}))
"""


def _exchange(cluster, mode: str, n: int) -> dict:
    import json

    a, b = (h.pid for h in cluster.holders)
    srv = subprocess.Popen(["nsenter", "-t", str(b), "-n", "--", sys.executable, "-c", _SERVER],
                           stdout=subprocess.PIPE, text=True)
    try:
        assert srv.stdout.readline().strip() == "ready"
        out = subprocess.run(["nsenter", "-t", str(a), "-n", "--", sys.executable, "-c", _CLIENT, mode, str(n),
                              f"{SUBNET}.2"], capture_output=True, text=True, timeout=120, check=True)
        return json.loads(out.stdout)
    finally:
        srv.kill()
        srv.wait()


def _shaped_cluster(tmp_path, shape):
    spec = ClusterSpec(machines=2, trainers=1, shape=shape)
    cluster = EmulatedCluster(spec, tmp_path)
    cluster._make_namespaces()
    return cluster


@needs_root
def test_the_rate_is_applied_inside_each_namespace_and_a_tcp_stream_runs_at_it(tmp_path):
    rate = 2.5e6  # 20 Mbit/s: well below what the VM's veths carry unshaped (GB/s)
    cluster = _shaped_cluster(tmp_path, netem.LinkShape(rate, 0.0, "test"))
    try:
        assert len(cluster.qdiscs) == 2
        for shown in cluster.qdiscs:  # read back from inside each machine's namespace
            assert netem.parse_rate(shown) == pytest.approx(rate, rel=0.01)
        got = _exchange(cluster, "s", int(3 * rate))
        measured = got["bytes"] / got["s"]
        assert measured == pytest.approx(rate, rel=0.15)
    finally:
        cluster.close(grace_s=0)


@needs_root
@pytest.mark.skipif(not (ROOT and netem.probe()["netem"]), reason="this kernel has no sch_netem (tc netem delay)")
def test_the_delay_is_applied_inside_each_namespace_and_a_tcp_round_trip_takes_twice_it(tmp_path):
    delay = 0.005
    cluster = _shaped_cluster(tmp_path, netem.LinkShape(1.25e8, delay, "test"))
    try:
        for shown in cluster.qdiscs:
            assert netem.parse_delay(shown) == pytest.approx(delay, rel=0.01)
        rtt = statistics.median(_exchange(cluster, "p", 40)["rtts"][5:])
        assert 2 * delay <= rtt <= 2 * delay + netem.round_trip_tolerance(delay)
    finally:
        cluster.close(grace_s=0)


@needs_root
def test_without_shaping_the_links_run_unshaped_and_the_probe_is_recorded(tmp_path):
    cluster = _shaped_cluster(tmp_path, None)
    try:
        assert cluster.qdiscs == []
        got = _exchange(cluster, "s", int(20e6))
        assert got["bytes"] / got["s"] > 10 * 2.5e6  # far above the shaped test's rate
    finally:
        cluster.close(grace_s=0)
    found = netem.probe()
    assert set(found) == {"available", "netem", "tbf", "reason"}
    assert found["available"] == (found["netem"] and found["tbf"])
    assert (found["reason"] is None) == found["available"]
