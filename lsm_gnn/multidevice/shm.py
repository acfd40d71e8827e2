"""Rows between the ranks of one host through shared memory: the host data plane's peer access.

On a GPU node the shared cache's rows cross between devices over NVLink, a device reading or
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

import numpy as np

from lsm_gnn.utils.errors import InputError

SHM_DIR = "/dev/shm"
PREFIX = "lsm-gnn-xch-"
# header sent to each peer: owner pid, outbox generation, byte offset of the peer's block, token
HEADER = 4


def _path(pid: int, rank: int, gen: int) -> str:
    return os.path.join(SHM_DIR, f"{PREFIX}{pid}-{rank}-{gen}")


def _alive(pid: int) -> bool:
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
        if not name.startswith(PREFIX):
            continue
        try:
            pid = int(name[len(PREFIX):].split("-")[0])
        except ValueError:
            continue
        if not _alive(pid):
            try:
                os.unlink(os.path.join(directory, name))
                removed.append(os.path.join(directory, name))
            except OSError:
                pass
    return removed


def available() -> bool:
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
        if not available():
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
        self.own = _Segment(_path(self.pid, self.rank, self.gen), cap, create=True)
        # its name goes at the next write: by then every peer has mapped it (module docstring)
        self._unlink_next.append(self.own.path)
        if old is not None:
            old.close()

    def probe(self) -> np.ndarray:
        """Header for the first exchange: a small segment holding a random token, so each peer can
        check that it maps this very memory (same host, same /dev/shm)."""
        self._grow(8)
        self.own.array[:8] = np.frombuffer(np.int64(self.token).tobytes(), dtype=np.uint8)
        header = np.zeros((self.world_size, HEADER), dtype=np.int64)
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
        header = np.zeros((self.world_size, HEADER), dtype=np.int64)
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
        seg = _Segment(_path(pid, owner, gen), 0, create=False)
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
