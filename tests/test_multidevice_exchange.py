"""The exchange protocol on 2 gloo ranks (127.0.0.1), with an in-memory owner as the cache."""

import json
import os

import numpy as np
import torch.multiprocessing as mp

from lsm_gnn.features import MemoryFeatureSource

N, DIM, W = 997, 7, 3


class RecordingOwner(MemoryFeatureSource):
    """In-memory owner cache that checks it only sees its own rows and records its windows."""

    def __init__(self, feats, G, owner):
        super().__init__(feats)
        self.G, self.owner, self.windows, self.served = G, owner, [], []

    def advance(self, window):
        assert all(np.all(w % self.G == self.owner) for w in window)
        self.windows.append([np.sort(w).tolist() for w in window])

    def fetch(self, ids):
        assert np.all(ids % self.G == self.owner)
        self.served.append(np.sort(ids).tolist())
        return super().fetch(ids)


def batches_of(rank, n=8):
    rng = np.random.default_rng(100 + rank)
    return [rng.integers(0, N, 40 + 13 * rank + b) for b in range(n)]


def _rank(rank, G, port, outdir):
    import torch
    import torch.distributed as dist

    from lsm_gnn.multidevice.exchange import Exchange
    from lsm_gnn.multidevice.source import SharedCacheFeatureSource

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=G)
    feats = np.random.default_rng(7).normal(size=(N, DIM)).astype(np.float32)
    owner = RecordingOwner(feats, G, rank)
    src = SharedCacheFeatureSource(owner, Exchange(rank, G), num_rows=N, row_dim=DIM, dtype=np.float32,
                                   max_window=W)
    mine = batches_of(rank)
    ok = True
    for b, ids in enumerate(mine):
        src.advance(mine[b + 1: b + 1 + W])
        ok &= bool(np.array_equal(src.fetch(ids), feats[ids]))
    # an empty request and a restarted (unrelated) window still work
    src.advance([])
    ok &= src.fetch(np.zeros(0, np.int64)).shape == (0, DIM)
    with open(os.path.join(outdir, f"{rank}.json"), "w") as f:
        json.dump({"ok": ok, "windows": owner.windows, "served": owner.served,
                   "stats": src.ex.stats.as_dict(), "peer_rows": src.peer_rows}, f)
    dist.destroy_process_group()


def test_two_ranks_rows_windows_and_bytes(tmp_path):
    from lsm_gnn.multidevice.launch import pick_free_port

    G = 2
    mp.spawn(_rank, args=(G, pick_free_port(), str(tmp_path)), nprocs=G)
    res = [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(G)]
    assert all(r["ok"] for r in res)  # every row received equals the file's row
    reqs = [batches_of(r) for r in range(G)]
    for o in range(G):
        owned = lambda b: sorted(int(v) for r in range(G) for v in reqs[r][b] if v % G == o)  # noqa: E731
        # the owner served, per iteration, exactly the rows every rank asked it for
        assert res[o]["served"][:8] == [owned(b) for b in range(8)]
        # and before iteration b it knew every rank's requests for b+1..b+W
        for b in range(8):
            assert res[o]["windows"][b] == [owned(k) for k in range(b + 1, min(8, b + 1 + W))]
    for r in range(G):
        peer = sum(int((x % G != r).sum()) for x in reqs[r])
        assert res[r]["peer_rows"] == peer
        served_to_peer = sum(int((x % G == r).sum()) for q in range(G) if q != r for x in reqs[q])
        assert res[r]["stats"]["row_bytes"] == served_to_peer * DIM * 4
        # ids: every batch's peer ids once when fetched, batches 1..7 once more when announced
        # W ahead (batch 0 never is), plus headers: 9 fetches x 1 count, 9 advances x (3 + W)
        peer_b0 = int((reqs[r][0] % G != r).sum())
        headers = 9 * 8 + 9 * (3 + W) * 8
        assert res[r]["stats"]["id_bytes"] == (2 * peer - peer_b0) * 8 + headers
