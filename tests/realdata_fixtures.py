"""Tiny files in the exact layouts of the real datasets, and a loopback HTTP server to serve them.

Layouts follow the public sources cited in lsm_gnn/datasets/real/catalog.py (IGB tarballs, IGB
large/full headerless arrays, ogbn-papers100M zip with .npz members, MAG240M zip with torch-pickled
meta/split dicts). The arrays are small (a few hundred nodes) but keep the real dims and dtypes
(1024 x float32 for IGB, 128 x float32 for papers100M, 768 x float16 for MAG240M), so the files are
a few MB.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import socket
import sys
import tarfile
import threading
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

IGB_DIM = 1024
IGBH_TINY = {"paper": 240, "author": 300, "fos": 40, "institute": 16, "journal": 9, "conference": 5}
IGBH_RELS = (("paper", "cites", "paper"), ("paper", "written_by", "author"), ("paper", "topic", "fos"),
             ("author", "affiliated_to", "institute"), ("paper", "published", "journal"),
             ("paper", "venue", "conference"))


def md5_of(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


# ---- loopback HTTP server --------------------------------------------------------------------
@dataclass
class FileServer:
    """Serves `files` (URL path -> bytes). Modes: Range support (default), `ignore_range`, and
    `drops[path] = (n, at)`: the next n responses for path stop after `at` body bytes and close."""

    files: dict = field(default_factory=dict)
    ignore_range: bool = False
    drops: dict = field(default_factory=dict)
    log: list = field(default_factory=list)

    def __post_init__(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                data = server.files.get(self.path)
                rng = self.headers.get("Range")
                if data is None:
                    server.log.append((self.path, rng, 404))
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                start, status = 0, 200
                if rng and not server.ignore_range:
                    start = int(rng.split("=")[1].split("-")[0])
                    if start >= len(data):
                        server.log.append((self.path, rng, 416))
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    status = 206
                body = data[start:]
                server.log.append((self.path, rng, status))
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Accept-Ranges", "bytes")
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()
                n, at = server.drops.get(self.path, (0, 0))
                if n > 0:
                    server.drops[self.path] = (n - 1, at)
                    self.wfile.write(body[:at])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(body)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                # a client that gives up on a dropped connection resets the next one: expected here
                if not isinstance(sys.exc_info()[1], ConnectionError):
                    super().handle_error(request, client_address)

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def add(self, path: str, data: bytes) -> str:
        self.files[path] = data
        return self.base + path

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


# ---- IGB / IGBH --------------------------------------------------------------------------------
def _edges(rng, n_src, n_dst, m, symmetric=False):
    src = rng.integers(0, n_src, m)
    dst = rng.integers(0, n_dst, m)
    if symmetric:  # the IGB generation scripts append [a, b] and [b, a]
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    return np.stack([src, dst], axis=1).astype(np.int64)  # (E, 2)


def write_igb(root: Path, size: str = "tiny", hetero: bool = False, raw: bool = False, seed: int = 0,
              counts: dict | None = None, label_rows: int | None = None) -> dict:
    """`root/<size>/processed/...` in the IGB layout; returns the arrays written.

    raw=True writes paper/author features and the label files headerless (large/full style).
    label_rows < N writes a short label file (IGB-full style)."""
    rng = np.random.default_rng(seed)
    counts = dict(counts or (IGBH_TINY if hetero else {"paper": 300}))
    proc = root / size / "processed"
    out = {"counts": counts, "feat": {}, "edges": {}}
    for t, n in counts.items():
        d = proc / t
        d.mkdir(parents=True, exist_ok=True)
        feat = rng.standard_normal((n, IGB_DIM)).astype(np.float32)
        out["feat"][t] = feat
        if raw and t in ("paper", "author"):
            feat.tofile(d / "node_feat.npy")
        else:
            np.save(d / "node_feat.npy", feat)
        np.save(d / f"{t}_id_index_mapping.npy", {int(i) * 7 + 1: i for i in range(min(n, 20))}, allow_pickle=True)
    n = counts["paper"]
    for name, k in (("19", 19), ("2K", 2983)):
        lab = rng.integers(0, k, n).astype(np.float32)[: label_rows or n]
        out[f"label_{name}"] = lab
        path = proc / "paper" / f"node_label_{name}.npy"
        lab.tofile(path) if raw else np.save(path, lab)
    rels = IGBH_RELS if hetero else IGBH_RELS[:1]
    for s, r, d in rels:
        m = 3 * counts[s] if s != d else 4 * counts[s]
        e = _edges(rng, counts[s], counts[d], m, symmetric=(s == d))
        rd = proc / f"{s}__{r}__{d}"
        rd.mkdir(parents=True, exist_ok=True)
        np.save(rd / "edge_index.npy", e)
        out["edges"][(s, r, d)] = e
    return out


def tar_gz(src_root: Path, top: str) -> bytes:
    """A tar.gz holding `top/...` from src_root/top (the IGB tarballs hold `<size>/processed/...`)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        tf.add(src_root / top, arcname=top)
    return buf.getvalue()


def files_under(root: Path, prefix: str = "") -> dict:
    """{"/<prefix>/<relative path>": bytes} of every file under root."""
    return {f"{prefix}/{p.relative_to(root).as_posix()}": p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# ---- ogbn-papers100M ---------------------------------------------------------------------------
def papers100m_zip(n: int = 400, m: int = 1600, seed: int = 1) -> tuple[bytes, dict]:
    rng = np.random.default_rng(seed)
    edge_index = np.stack([rng.integers(0, n, m), rng.integers(0, n, m)]).astype(np.int64)  # (2, E)
    feat = rng.standard_normal((n, 128)).astype(np.float32)
    label = rng.integers(0, 172, n).astype(np.float64)
    labeled = np.sort(rng.choice(n, n // 4, replace=False))
    mask = np.ones(n, bool)
    mask[labeled] = False
    label[mask] = np.nan
    label = label.reshape(n, 1).astype(np.float32)
    year = rng.integers(1990, 2020, (n, 1)).astype(np.int64)
    data_npz, label_npz = io.BytesIO(), io.BytesIO()
    np.savez_compressed(data_npz, edge_index=edge_index, node_feat=feat, node_year=year,
                        num_nodes_list=np.array([n]), num_edges_list=np.array([m]))
    np.savez_compressed(label_npz, node_label=label)
    tr, va, te = labeled[: len(labeled) // 2], labeled[len(labeled) // 2: 3 * len(labeled) // 4], labeled[3 * len(labeled) // 4:]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("papers100M-bin/RELEASE_v1.txt", "ogbn-papers100M release v1\n")
        z.writestr("papers100M-bin/raw/data.npz", data_npz.getvalue())
        z.writestr("papers100M-bin/raw/node-label.npz", label_npz.getvalue())
        for name, ids in (("train", tr), ("valid", va), ("test", te)):
            z.writestr(f"papers100M-bin/split/time/{name}.csv.gz",
                       gzip.compress("".join(f"{i}\n" for i in ids).encode()))
        z.writestr("papers100M-bin/mapping/README.md", "id mappings\n")
    return buf.getvalue(), {"edge_index": edge_index, "feat": feat, "label": label, "splits": (tr, va, te)}


# ---- MAG240M -----------------------------------------------------------------------------------
def torch_pickle(obj: dict, numpy1_names: bool = False) -> bytes:
    """torch.save bytes; numpy1_names rewrites the numpy globals as numpy 1.x wrote them
    (`numpy.core.multiarray`), as in the 2021 release files."""
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    if not numpy1_names:
        return buf.getvalue()
    src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("data.pkl"):
                data = data.replace(b"cnumpy._core.multiarray\n", b"cnumpy.core.multiarray\n")
            dst.writestr(info.filename, data)
    return out.getvalue()


def mag240m_zip(counts=(300, 350, 12), seed: int = 2) -> tuple[bytes, dict]:
    rng = np.random.default_rng(seed)
    n_paper, n_author, n_inst = counts
    feat = rng.standard_normal((n_paper, 768)).astype(np.float16)
    label = rng.integers(0, 153, n_paper).astype(np.float64)
    perm = rng.permutation(n_paper)
    tr, va, td, tc = np.sort(perm[:60]), np.sort(perm[60:80]), np.sort(perm[80:95]), np.sort(perm[95:105])
    label[perm[80:105]] = -1          # hidden test labels
    label[perm[105:]] = np.nan        # non-arXiv papers
    year = rng.integers(1990, 2020, n_paper).astype(np.int64)
    edges = {
        "author___writes___paper": np.stack([rng.integers(0, n_author, 900), rng.integers(0, n_paper, 900)]),
        "author___affiliated_with___institution": np.stack([rng.integers(0, n_author, 200), rng.integers(0, n_inst, 200)]),
        "paper___cites___paper": np.stack([rng.integers(0, n_paper, 1200), rng.integers(0, n_paper, 1200)]),
    }
    meta = {"paper": n_paper, "author": n_author, "institution": n_inst, "num_classes": 153}
    split = {"train": tr, "valid": va, "test-dev": td, "test-challenge": tc}
    buf = io.BytesIO()
    r = "mag240m_kddcup2021"
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{r}/RELEASE_v1.txt", "MAG240M release v1\n")
        z.writestr(f"{r}/meta.pt", torch_pickle(meta))
        z.writestr(f"{r}/split_dict.pt", torch_pickle(split, numpy1_names=True))
        z.writestr(f"{r}/processed/paper/node_feat.npy", npy_bytes(feat))
        z.writestr(f"{r}/processed/paper/node_label.npy", npy_bytes(label))
        z.writestr(f"{r}/processed/paper/node_year.npy", npy_bytes(year))
        for k, e in edges.items():
            z.writestr(f"{r}/processed/{k}/edge_index.npy", npy_bytes(e.astype(np.int64)))
    return buf.getvalue(), {"feat": feat, "label": label, "edges": edges, "split": split, "meta": meta}
