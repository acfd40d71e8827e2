"""Dist-DGL in the emulated testbed: every stage charged at the part that runs it in the paper's
testbed (lsm_gnn.testbed: the table; lsm_gnn.storage.charge: the primitive).

- Servers: the request handlers that do the work (PullRequest: the gather of the rows asked for;
  SamplingRequest: a remote sampling step) are host work of a server core, each charged at
  S x f x its thread CPU time (`patch_server`). A server handles its requests one at a time, so
  the padding also holds the next request back, as a server core of the paper's testbed would.
  Each server writes its charges to `server<id>.json` beside the trainers' metrics when it exits.
- Every charged host stage also records its thread's resource use (`thread_usage`: user and system
  CPU time, page faults, context switches), so that a run whose host stages took more CPU time
  than another's says whether the work ran slower (user), the kernel did more (faults, reclaim), or
  a wait spun instead of blocking (voluntary switches).
- Trainers (`TrainerCharges`): sampling (the local partition's sampling, the RPCs' (de)serialisation)
  and the KVStore pull (partition lookups, id mapping, the local copies) are host work of the
  trainer's core, charged additively (their own CPU time stretched to S x f x it, the waits on the
  servers left as the servers charged them); every RPC round trip to another machine adds the NIC's
  round trip x S (this kernel has no sch_netem to delay packets, so the delay is emulated in user
  space: the round trips are counted), the remote rows' bytes / the NIC's bandwidth x S; each
  batch's copy to the GPU (features, labels, the blocks' edges) is charged on PCIe.
"""

from __future__ import annotations

import atexit
import json
import os
from pathlib import Path

from lsm_gnn.storage.charge import Charger, charger_for

EDGE_BYTES = 16
"""Bytes a block edge takes on the GPU: its source and destination ids (int64 each)."""


def patch_server(tb: dict, metrics_dir: str, server_id: str) -> Charger:
    """Charge a server's pull and sampling handlers as host work (before dgl.distributed.initialize)."""
    from dgl.distributed import graph_services, kvstore

    ch = charger_for(tb)
    usage: dict[str, dict] = {}

    def wrap(cls, stage):
        orig = cls.process_request

        def process_request(self, server_state):
            with ch.host(stage):
                u0 = thread_usage()   # the handler's own use, not the padding's wait after it
                try:
                    return orig(self, server_state)
                finally:
                    add_usage(usage, stage, u0)

        cls.process_request = process_request

    wrap(kvstore.PullRequest, "server_pull")
    for name in ("SamplingRequest", "SamplingRequestEtype"):
        if hasattr(graph_services, name):
            wrap(getattr(graph_services, name), "server_sample")

    def dump():
        path = Path(metrics_dir) / f"server{server_id}.json"
        tmp = path.with_name(f".{path.name}.partial")
        tmp.write_text(json.dumps({"server": server_id, "raw": ch.raw(), "usage": usage}))
        os.replace(tmp, path)

    atexit.register(dump)
    return ch


class TrainerCharges:
    """A trainer's charges: its host stages, the round trips it makes and the copies to its GPU."""

    def __init__(self, tb: dict, partition_book, row_bytes: int):
        from dgl.distributed import graph_services

        self.ch = charger_for(tb)
        self.pcie, self.nic = tb["pcie"], tb["nic"]
        self.pb = partition_book
        self.row_bytes = int(row_bytes)
        self.round_trips = 0
        self.counted = {"sample_round_trips": 0, "pull_round_trips": 0, "remote_rows": 0}
        self.usage: dict[str, dict] = {}
        orig = graph_services.send_requests_to_machine

        def counted(req_list):  # one parallel round trip to the machines asked
            if len(req_list):
                self.round_trips += 1
            return orig(req_list)

        graph_services.send_requests_to_machine = counted

    def sample(self, it):
        """next(it), charged: host work additive, then each round trip's RTT x S."""
        import time

        self.round_trips = 0
        with self.ch.host("sample", additive=True):
            u0 = thread_usage()
            out = next(it)
            self._used("sample", u0)
        trips = self.round_trips
        self.ch.link("sample_rpc", "nic", time.perf_counter_ns(), 0, self.nic["bandwidth"], self.nic["latency_s"],
                     transfers=trips)
        if self.ch.recording:
            self.counted["sample_round_trips"] += trips
        return out

    def pull(self, g, input_nodes, seeds):
        """The features and labels of a batch, charged: host work additive, then the remote rows'
        round trip and bytes on the NIC."""
        import time

        with self.ch.host("exchange_rows", additive=True):
            u0 = thread_usage()
            x = g.ndata["feat"][input_nodes]
            y = g.ndata["label"][seeds].long()
            remote = int((self.pb.nid2partid(input_nodes) != self.pb.partid).sum())
            self._used("exchange_rows", u0)
        self.ch.link("pull_rpc", "nic", time.perf_counter_ns(), remote * self.row_bytes, self.nic["bandwidth"],
                     self.nic["latency_s"], transfers=1 if remote else 0)
        if self.ch.recording:
            self.counted["pull_round_trips"] += 1 if remote else 0
            self.counted["remote_rows"] += remote
        return x, y

    def copy_to_gpu(self, x, y, edges: int) -> int:
        """The batch's copy to the trainer's GPU on PCIe; returns the bytes."""
        import time

        nbytes = int(x.numel() * x.element_size() + y.numel() * y.element_size() + EDGE_BYTES * edges)
        self.ch.link("copy_to_gpu", "pcie", time.perf_counter_ns(), nbytes, self.pcie["bandwidth"],
                     self.pcie["latency_s"])
        return nbytes

    def _used(self, stage: str, before: dict) -> None:
        if self.ch.recording:
            add_usage(self.usage, stage, before)

    def record(self) -> dict:
        return {"raw": self.ch.raw(), "counted": dict(self.counted), "usage": self.usage}


def add_usage(usage: dict, stage: str, before: dict) -> None:
    """Add the calling thread's resource use since `before` (thread_usage) to usage[stage]."""
    after = thread_usage()
    acc = usage.setdefault(stage, dict.fromkeys(after, 0))
    for k, v in after.items():
        acc[k] += v - before[k]


def thread_usage() -> dict:
    """The calling thread's resource use so far (getrusage RUSAGE_THREAD): user and system CPU
    seconds, minor and major page faults, voluntary and involuntary context switches. Why it is
    recorded beside the charge: a host stage is charged at its thread CPU time, and this tells
    the work (user) from the kernel's (faults, reclaim) and a blocking wait (voluntary switches)
    from a spinning one. A thread's times in getrusage advance at the scheduler's ticks and
    switches, so one short request's figures are lumpy; a run's sums are what they are read for."""
    import resource

    r = resource.getrusage(resource.RUSAGE_THREAD)
    return {"user_s": r.ru_utime, "sys_s": r.ru_stime, "minflt": r.ru_minflt, "majflt": r.ru_majflt,
            "nvcsw": r.ru_nvcsw, "nivcsw": r.ru_nivcsw}
