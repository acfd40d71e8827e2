"""The exchange of the shared cache: counts, then ids, then rows back, over torch.distributed.

Every message is one `all_to_all_single` with uneven splits over a flat buffer (gloo cannot do list
`all_to_all` with uneven sizes; measured, see docs/multi-device.md): first the fixed-size per-peer
headers (counts), so each rank knows how much it receives, then the payload. Rows travel as raw
bytes, so any feature dtype works on gloo (CPU) and NCCL (CUDA) alike. Bytes are counted as what a
rank sends to *other* ranks (its own bucket never leaves the device); summed over ranks that is the
device-to-device traffic. A failed or timed-out collective becomes a `DistributedError`.

Two kinds of payload:
- torch tensors (the device data plane, lsm_gnn.sources.shared): sent from and received into
  tensors on the exchange's device (CUDA with NCCL, no host round trip; the CPU with gloo; a
  tensor elsewhere is moved there first); the result is a tensor on the exchange's device;
- numpy arrays (the host data plane, headers, lookahead ids): on gloo wrapped without a copy; with
  NCCL copied to the device and the result back to the host (they are host data).

The host data plane's rows (`send_rows`) take one of two transports (`transport`):
- `collective`: the flat all_to_all above;
- `shm`: when every rank maps the same /dev/shm (one host), the owner writes each peer's rows into
  its shared-memory outbox and the requester reorders them out of it (`Outboxes` below, the
  CPU ranks' analogue of reading a peer GPU's memory over NVLink); only a small header of offsets
  goes through gloo. `auto` probes once, at the first rows, and uses shm when every rank can
  (every rank sees every probe, so all reach the same answer), else the collective.

The shm transport (`Outboxes`, at the end of this module): rows between the ranks of one host
through shared memory, the host data plane's peer access. On a GPU node the shared cache's rows cross between devices over NVLink, a device reading or
writing a peer's memory directly. Between CPU ranks on one host the same thing is a memory segment
both processes map: the owner writes the rows each peer asked for into its *outbox* (a POSIX
shared-memory file under /dev/shm), and after one small message that says where each peer's block
begins (it doubles as the barrier that the writes are done), every requester reorders its rows
straight out of the owners' outboxes. Each row is copied twice (into the outbox, out of it into
the requester's order), as the gloo path copies it; what goes is gloo's TCP loopback in between,
which carried 25.7 MB per iteration at about 0.6 GB/s per rank on the 2-core build VM
(2026-12-01, docs/multi-device.md).

Safety without locks: an owner rewrites its outbox only inside the next `send` call, which comes
after that iteration's count and id exchanges; a requester enters those only after it finished
reading, so no outbox is rewritten while a peer reads it. An outbox that must grow is a new
segment (a new generation); peers map it when the header names it and drop the old mapping.

Names: `/dev/shm/lsm-gnn-xch-<pid>-<rank>-<generation>`. The owner unlinks a segment's name once every
peer has mapped it (one iteration later: the mappings stay valid), so a killed run leaves at most
one segment per rank; `sweep_stale` removes those of processes that no longer exist, and the
next run calls it.
"""

from __future__ import annotations

import mmap
import os
import secrets
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.distributed as dist

from lsm_gnn.multidevice.health import NULL_HEARTBEAT, Heartbeat
from lsm_gnn.utils.errors import DistributedError, InputError

TRANSPORTS = ("auto", "shm", "collective")


@dataclass
class ExchangeStats:
    id_bytes: int = 0        # ids + headers sent to other ranks
    row_bytes: int = 0       # feature rows sent to other ranks
    id_seconds: float = 0.0
    row_seconds: float = 0.0
    calls: int = 0

    @property
    def bytes(self) -> int:
        return self.id_bytes + self.row_bytes

    def as_dict(self) -> dict:
        return {**asdict(self), "bytes": self.bytes}


class ReceivedRows:
    """The rows a requester received, one block per owner in rank order (uint8 row views: a slice
    of the collective's buffer, or of an owner's shared-memory outbox), until the next exchange.
    The requester puts them in its own order with the one reorder rule,
    `lsm_gnn.ownership.reorder_blocks(received.blocks, positions, out)`."""

    def __init__(self, blocks: list[np.ndarray], dim: int, dtype):
        self.blocks, self.dim, self.dtype = blocks, dim, np.dtype(dtype)

    def __len__(self) -> int:
        return int(sum(len(b) for b in self.blocks))


class Exchange:
    """All-to-all messages between the ranks of the default (or a given) process group."""

    def __init__(self, rank: int, world_size: int, *, device: str | torch.device = "cpu", group=None,
                 heartbeat: Heartbeat = NULL_HEARTBEAT, transport: str = "collective"):
        if transport not in TRANSPORTS:
            raise InputError(f"distributed.row_transport: expected one of {', '.join(TRANSPORTS)}, "
                             f"found {transport!r}")
        self.rank, self.world_size = rank, world_size
        self.device = torch.device(device)
        self.group = group
        self.heartbeat = heartbeat
        self.stats = ExchangeStats()
        # the host plane's rows: "auto" and "shm" are settled by the first send_rows (`_settle`)
        self.transport = transport if self.device.type == "cpu" and world_size > 1 else "collective"
        self.transport_note: str | None = None
        self._settled = self.transport == "collective"
        self._outboxes = None

    # ---- low level -----------------------------------------------------------------------------
    def all_to_all(self, send: torch.Tensor, send_splits, recv_splits, what: str) -> torch.Tensor:
        """One flat all_to_all_single of a 1-D tensor (splits in elements); the result is a tensor
        on the exchange's device."""
        if send.device != self.device and not (send.device.type == self.device.type == "cuda"
                                                and self.device.index is None):
            # an asynchronous copy only to the device: a tensor copied to the host must be complete
            send = send.to(self.device, non_blocking=send.device.type == "cpu")
        send = send.contiguous()
        recv = torch.empty(int(np.sum(recv_splits)), dtype=send.dtype, device=send.device)
        try:
            with self.heartbeat.collective():
                dist.all_to_all_single(recv, send, output_split_sizes=[int(x) for x in recv_splits],
                                       input_split_sizes=[int(x) for x in send_splits], group=self.group)
        except (RuntimeError, ValueError) as e:  # gloo/NCCL report a dead or silent peer this way
            raise DistributedError(None, f"exchange of {what} failed on rank {self.rank}: "
                                         f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from e
        return recv

    def _all_to_all(self, send: np.ndarray, send_splits, recv_splits, what: str) -> np.ndarray:
        """all_to_all of a 1-D numpy array: host data in, host data out."""
        recv = self.all_to_all(torch.from_numpy(np.ascontiguousarray(send)), send_splits, recv_splits, what)
        return recv.numpy() if recv.device.type == "cpu" else recv.cpu().numpy()

    def _peer_sum(self, splits, unit: int) -> int:
        return int(sum(int(s) for r, s in enumerate(splits) if r != self.rank)) * unit

    # ---- messages --------------------------------------------------------------------------------
    def headers(self, send: np.ndarray) -> np.ndarray:
        """Exchange a fixed-size int64 header per peer: send[(G, k)] -> received[(G, k)] (host)."""
        send = np.ascontiguousarray(send, dtype=np.int64)
        if send.ndim != 2 or send.shape[0] != self.world_size:
            raise InputError(f"headers: expected shape ({self.world_size}, k), found {send.shape}")
        k = send.shape[1]
        t0 = time.perf_counter()
        splits = [k] * self.world_size
        out = self._all_to_all(send.reshape(-1), splits, splits, "counts").reshape(self.world_size, k)
        self.stats.id_seconds += time.perf_counter() - t0
        self.stats.id_bytes += self._peer_sum(splits, 8)
        return out

    def counts(self, send: torch.Tensor) -> torch.Tensor:
        """Exchange one int64 count per peer, as tensors: send[(G,)] -> received[(G,)] on the
        exchange's device (the device data plane's counts; same bytes as `headers`)."""
        if send.ndim != 1 or send.shape[0] != self.world_size:
            raise InputError(f"counts: expected shape ({self.world_size},), found {tuple(send.shape)}")
        t0 = time.perf_counter()
        splits = [1] * self.world_size
        out = self.all_to_all(send.to(torch.int64), splits, splits, "counts")
        self.stats.id_seconds += time.perf_counter() - t0
        self.stats.id_bytes += self._peer_sum(splits, 8)
        return out

    def ids(self, send_ids, send_counts, recv_counts):
        """Send bucket r of `send_ids` (send_counts[r] ids) to rank r; receive recv_counts[r] from r.
        A tensor in, a tensor on the exchange's device out; a numpy array in, a numpy array out."""
        t0 = time.perf_counter()
        if isinstance(send_ids, torch.Tensor):
            out = self.all_to_all(send_ids.to(torch.int64), send_counts, recv_counts, "ids")
        else:
            out = self._all_to_all(np.asarray(send_ids, dtype=np.int64), send_counts, recv_counts, "ids")
        self.stats.id_seconds += time.perf_counter() - t0
        self.stats.id_bytes += self._peer_sum(send_counts, 8)
        return out

    def rows(self, rows, send_counts, recv_counts):
        """Send rows[(n, dim)] in per-rank blocks of send_counts rows; receive recv_counts rows.
        A tensor in, a tensor on the exchange's device out; a numpy array in, a numpy array out."""
        t0 = time.perf_counter()
        if isinstance(rows, torch.Tensor):
            rows = rows.contiguous()
            dim = rows.shape[1]
            row_bytes = dim * rows.element_size()
            flat = rows.view(torch.uint8).reshape(-1) if rows.numel() else \
                torch.empty(0, dtype=torch.uint8, device=rows.device)
            got = self.all_to_all(flat, [int(c) * row_bytes for c in send_counts],
                                  [int(c) * row_bytes for c in recv_counts], "rows")
            out = got.view(rows.dtype).reshape(-1, dim) if got.numel() else \
                torch.empty((0, dim), dtype=rows.dtype, device=got.device)
        else:
            rows = np.ascontiguousarray(rows)
            row_bytes = rows.shape[1] * rows.dtype.itemsize
            flat = rows.view(np.uint8).reshape(-1)
            got = self._all_to_all(flat, [int(c) * row_bytes for c in send_counts],
                                   [int(c) * row_bytes for c in recv_counts], "rows")
            out = got.view(rows.dtype).reshape(-1, rows.shape[1])
        self.stats.row_seconds += time.perf_counter() - t0
        self.stats.row_bytes += self._peer_sum(send_counts, row_bytes)
        self.stats.calls += 1
        return out

    def _settle(self) -> None:
        """Decide the host plane's transport once, with every rank (two small headers)."""
        wanted, self._settled = self.transport, True
        box, problem = None, None
        try:
            box = Outboxes(self.rank, self.world_size)
            header = box.probe()
        except (OSError, InputError) as e:
            problem = f"rank {self.rank}: {e}"
            header = np.zeros((self.world_size, SHM_HEADER), dtype=np.int64)
            header[:, 0] = -1
        got = self.headers(header)
        ok = box is not None and all(int(got[o, 0]) > 0 for o in range(self.world_size) if o != self.rank) \
            and box.check_probe(got)
        if box is not None and not ok and problem is None:
            problem = f"rank {self.rank} does not map its peers' {SHM_DIR} segments (not one host?)"
        flags = self.headers(np.full((self.world_size, 1), int(ok), dtype=np.int64))
        if bool(flags.all()) and ok:
            self._outboxes, self.transport = box, "shm"
            return
        if box is not None:
            box.close()
        if wanted == "shm":
            raise DistributedError(None, f"distributed.row_transport=shm: {problem or 'a peer cannot map shared memory'}")
        self.transport, self.transport_note = "collective", problem or "a peer cannot map shared memory"

    def send_rows(self, rows: np.ndarray, send_counts, recv_counts) -> ReceivedRows:
        """The host plane's rows: send block r of rows[(n, dim)] (send_counts[r] rows) to rank r and
        receive recv_counts[r] rows from each rank r, by the settled transport. The result is valid
        until this rank's next exchange call."""
        if not self._settled:
            self._settle()
        rows = np.ascontiguousarray(rows)
        dim, row_bytes = rows.shape[1], rows.shape[1] * rows.dtype.itemsize
        if self.transport == "collective":
            got = self.rows(rows, send_counts, recv_counts)
            flat = got.reshape(len(got), -1).view(np.uint8) if got.size else np.zeros((0, row_bytes), np.uint8)
            off = np.concatenate([[0], np.cumsum(recv_counts)]).astype(np.int64)
            return ReceivedRows([flat[off[o]: off[o + 1]] for o in range(self.world_size)], dim, rows.dtype)
        t0 = time.perf_counter()
        header = self._outboxes.write(rows, np.asarray(send_counts, dtype=np.int64))
        # where each owner wrote my rows; when it returns, every outbox is written (a barrier)
        splits = [header.shape[1]] * self.world_size
        got = self._all_to_all(header.reshape(-1), splits, splits, "row offsets").reshape(self.world_size, -1)
        self.stats.id_bytes += self._peer_sum(splits, 8)
        flat = rows.reshape(len(rows), -1).view(np.uint8) if rows.size else np.zeros((0, row_bytes), np.uint8)
        own = np.concatenate([[0], np.cumsum(send_counts)]).astype(np.int64)
        blocks = []
        for o in range(self.world_size):
            if o == self.rank:
                blocks.append(flat[own[o]: own[o + 1]])
            else:  # mapped even when empty: a new outbox's name lasts one iteration
                blocks.append(self._outboxes.block(o, got[o], int(recv_counts[o]), row_bytes))
        self.stats.row_seconds += time.perf_counter() - t0
        self.stats.row_bytes += self._peer_sum(send_counts, row_bytes)
        self.stats.calls += 1
        return ReceivedRows(blocks, dim, rows.dtype)

    def close(self) -> None:
        """Unmap and unlink this rank's shared-memory segments (nothing else holds resources)."""
        if self._outboxes is not None:
            self._outboxes.close()
            self._outboxes = None

    def barrier(self) -> None:
        try:
            with self.heartbeat.collective():
                dist.barrier(group=self.group)
        except RuntimeError as e:
            raise DistributedError(None, f"barrier failed on rank {self.rank}: {str(e).splitlines()[0]}") from e


# ---- the shm transport: this rank's outbox and its mappings of the peers' outboxes ------------------
# header sent to each peer: owner pid, outbox generation, byte offset of the peer's block, token
SHM_DIR = "/dev/shm"
SHM_PREFIX = "lsm-gnn-xch-"
SHM_HEADER = 4


def _shm_path(pid: int, rank: int, gen: int) -> str:
    return os.path.join(SHM_DIR, f"{SHM_PREFIX}{pid}-{rank}-{gen}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(directory: str = SHM_DIR) -> list[str]:
    """Remove the outboxes of processes that no longer exist (a killed run's); the paths removed."""
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(SHM_PREFIX):
            continue
        try:
            pid = int(name[len(SHM_PREFIX):].split("-")[0])
        except ValueError:
            continue
        if not _pid_alive(pid):
            try:
                os.unlink(os.path.join(directory, name))
                removed.append(os.path.join(directory, name))
            except OSError:
                pass
    return removed


def shm_available() -> bool:
    """Whether this host has a writable /dev/shm (Linux)."""
    return os.path.isdir(SHM_DIR) and os.access(SHM_DIR, os.W_OK)


class _Segment:
    """One mapped shared-memory file (the owner's, created; or a peer's, opened)."""

    def __init__(self, path: str, nbytes: int, create: bool):
        self.path = path
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(path, flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, nbytes)
            else:
                nbytes = os.fstat(fd).st_size
            self.map = mmap.mmap(fd, max(nbytes, 1))
        finally:
            os.close(fd)
        self.nbytes = nbytes
        self.array = np.frombuffer(self.map, dtype=np.uint8, count=nbytes)

    def close(self) -> None:
        self.array = None
        try:
            self.map.close()
        except BufferError:  # a view still alive (a caller kept rows): the mapping goes with it
            pass


class Outboxes:
    """This rank's outbox and its mappings of the peers' outboxes (host data plane, one host)."""

    GROWTH = 1.25  # headroom when an outbox grows: rows per iteration vary by a few % between batches

    def __init__(self, rank: int, world_size: int):
        if not shm_available():
            raise InputError(f"shared-memory row transport: {SHM_DIR} is not a writable directory")
        self.rank, self.world_size = rank, world_size
        self.pid = os.getpid()
        self.gen = -1
        self.own: _Segment | None = None
        self.token = secrets.randbits(62)
        self._unlink_next: list[str] = []
        self.peers: dict[int, tuple[int, int, _Segment]] = {}  # owner -> (pid, gen, segment)
        sweep_stale()

    def _grow(self, nbytes: int) -> None:
        old = self.own
        self.gen += 1
        cap = max(int(nbytes * self.GROWTH), 4096)
        self.own = _Segment(_shm_path(self.pid, self.rank, self.gen), cap, create=True)
        # its name goes at the next write: by then every peer has mapped it (module docstring, shm)
        self._unlink_next.append(self.own.path)
        if old is not None:
            old.close()

    def probe(self) -> np.ndarray:
        """Header for the first exchange: a small segment holding a random token, so each peer can
        check that it maps this very memory (same host, same /dev/shm)."""
        self._grow(8)
        self.own.array[:8] = np.frombuffer(np.int64(self.token).tobytes(), dtype=np.uint8)
        header = np.zeros((self.world_size, SHM_HEADER), dtype=np.int64)
        header[:, 0], header[:, 1], header[:, 3] = self.pid, self.gen, self.token
        return header

    def check_probe(self, received: np.ndarray) -> bool:
        """Whether every peer's probe segment is the memory its token says (True: use shm)."""
        ok = True
        for o in range(self.world_size):
            if o == self.rank:
                continue
            pid, gen, _, token = (int(x) for x in received[o])
            try:
                seg = self._peer(o, pid, gen)
                ok &= bool(seg.nbytes >= 8 and int(seg.array[:8].view(np.int64)[0]) == token)
            except OSError:
                ok = False
        return ok

    def write(self, rows: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Write rows[(n, dim)] (blocks of counts[r] rows for requester r, in rank order) into the
        outbox, every block but this rank's own; the header for each peer (pid, gen, offset)."""
        for path in self._unlink_next:  # every peer mapped these during the previous iteration
            try:
                os.unlink(path)
            except OSError:
                pass
        self._unlink_next = []
        rows = np.ascontiguousarray(rows)
        row_bytes = rows.shape[1] * rows.dtype.itemsize
        starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        need = int(sum(int(counts[r]) for r in range(self.world_size) if r != self.rank)) * row_bytes
        if self.own is None or need > self.own.nbytes:
            self._grow(need)
        flat = rows.reshape(len(rows), -1).view(np.uint8) if rows.size else np.zeros((0, row_bytes), np.uint8)
        header = np.zeros((self.world_size, SHM_HEADER), dtype=np.int64)
        header[:, 0], header[:, 1] = self.pid, self.gen
        pos = 0
        for r in range(self.world_size):
            if r == self.rank:
                continue
            a, b = int(starts[r]), int(starts[r + 1])
            nb = (b - a) * row_bytes
            if nb:
                self.own.array[pos: pos + nb] = flat[a:b].reshape(-1)
            header[r, 2] = pos
            pos += nb
        return header

    def _peer(self, owner: int, pid: int, gen: int) -> _Segment:
        cur = self.peers.get(owner)
        if cur is not None and cur[0] == pid and cur[1] == gen:
            return cur[2]
        seg = _Segment(_shm_path(pid, owner, gen), 0, create=False)
        if cur is not None:
            cur[2].close()
        self.peers[owner] = (pid, gen, seg)
        return seg

    def block(self, owner: int, header_row: np.ndarray, nrows: int, row_bytes: int) -> np.ndarray:
        """The rows owner `owner` wrote for this rank: a (nrows, row_bytes) uint8 view of its outbox."""
        pid, gen, offset = (int(x) for x in header_row[:3])
        seg = self._peer(owner, pid, gen)
        nb = nrows * row_bytes
        if offset + nb > seg.nbytes:
            raise InputError(f"shared-memory rows: owner {owner}'s outbox {seg.path} holds {seg.nbytes} "
                             f"bytes, expected at least {offset + nb}")
        return seg.array[offset: offset + nb].reshape(nrows, row_bytes)

    def close(self) -> None:
        for _, _, seg in self.peers.values():
            seg.close()
        self.peers = {}
        for path in self._unlink_next + ([self.own.path] if self.own is not None else []):
            try:
                os.unlink(path)
            except OSError:
                pass
        self._unlink_next = []
        if self.own is not None:
            self.own.close()
            self.own = None
