"""Facts about the machine a run happens on (for `lsm-gnn info` and every run record)."""

from __future__ import annotations

import mmap
import os
import platform
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path


def gpu_status() -> dict:
    """Whether torch sees CUDA and whether CuPy is usable. Never raises without a GPU."""
    out = {"torch_cuda": False, "cupy": False, "cupy_installed": False, "gpu_name": None}
    try:
        import torch

        out["torch_cuda"] = bool(torch.cuda.is_available())
        if out["torch_cuda"]:
            out["gpu_name"] = torch.cuda.get_device_name(0)
    except Exception:  # pragma: no cover - torch is a hard dependency
        pass
    try:
        import cupy  # noqa: F401

        out["cupy_installed"] = True
        out["cupy"] = bool(cupy.is_available())
    except ImportError:
        pass
    except Exception:
        out["cupy"] = False
    return out


def versions() -> dict:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for name in ("lsm-gnn", "torch", "dgl", "numpy", "numba", "pandas", "snakemake", "cupy-cuda13x"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            pass
    return out


def hardware() -> dict:
    import psutil

    cpu_model = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    g = gpu_status()
    return {
        "hostname": platform.node(),
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "cpu_model": cpu_model,
        "cpus": os.cpu_count(),
        "memory_bytes": psutil.virtual_memory().total,
        "gpu": g["gpu_name"],
        "cuda": g["torch_cuda"],
        "cupy": g["cupy"],
        # the device the runs read from (the working directory's: data/ sits under it by default)
        "storage": storage_device(os.getcwd()),
    }


def _sys_read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def storage_device(path: str | os.PathLike) -> dict:
    """The block device holding `path`, as the kernel describes it (/sys/block): its name, model,
    size, whether it is rotational, the I/O scheduler in use, and the filesystem and mount point
    (MLPerf Storage's rules ask a result to name its storage). Fields the kernel does not give
    (a virtual disk has no model) are null; never raises."""
    import psutil

    out = {"device": None, "model": None, "size_bytes": None, "rotational": None, "scheduler": None,
           "fstype": None, "mountpoint": None}
    try:
        probe = Path(path).resolve()
        best = ""
        for part in psutil.disk_partitions(all=True):
            if str(probe).startswith(part.mountpoint) and len(part.mountpoint) > len(best):
                best = part.mountpoint
                out.update(device=part.device, fstype=part.fstype, mountpoint=part.mountpoint)
        dev = os.stat(probe).st_dev
        sysdev = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
        if not sysdev.exists():
            return out
        node = sysdev.resolve()
        # a partition's queue and model belong to its disk, one folder up
        disk = node.parent if (node / "partition").exists() else node
        out["device"] = out["device"] or f"/dev/{disk.name}"
        out["disk"] = disk.name
        out["model"] = _sys_read(disk / "device" / "model") or None
        sectors = _sys_read(disk / "size")
        out["size_bytes"] = int(sectors) * 512 if sectors and sectors.isdigit() else None
        rota = _sys_read(disk / "queue" / "rotational")
        out["rotational"] = None if rota is None else rota == "1"
        sched = _sys_read(disk / "queue" / "scheduler") or ""
        chosen = [w.strip("[]") for w in sched.split() if w.startswith("[")]
        out["scheduler"] = chosen[0] if chosen else (sched or None)
    except (OSError, ValueError):
        pass
    return out


def git_commit(repo: str | os.PathLike | None = None) -> str | None:
    repo = Path(repo) if repo else Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        if out.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        return None


def path_storage_info(path: str | os.PathLike) -> dict:
    """Filesystem, block size and whether O_DIRECT reads work at `path` (a file or directory)."""
    import psutil

    p = Path(path).resolve()
    probe_dir = p if p.is_dir() else p.parent
    st = os.statvfs(probe_dir)
    fs = None
    best = ""
    for part in psutil.disk_partitions(all=True):
        if str(probe_dir).startswith(part.mountpoint) and len(part.mountpoint) > len(best):
            best, fs = part.mountpoint, {"device": part.device, "fstype": part.fstype, "mountpoint": part.mountpoint}
    info = {"path": str(p), "filesystem": fs, "block_size": st.f_bsize,
            "free_bytes": st.f_bavail * st.f_frsize, "o_direct": o_direct_works(p)}
    return info


def o_direct_works(path: Path) -> bool:
    """Try an aligned 4 KiB O_DIRECT read (of `path` if it is a big enough file, else a probe file)."""
    flag = getattr(os, "O_DIRECT", None)
    if flag is None:
        return False
    probe = None
    target = path
    try:
        if not (path.is_file() and path.stat().st_size >= 4096):
            probe = (path if path.is_dir() else path.parent) / f".odirect-probe-{os.getpid()}"
            probe.write_bytes(b"\0" * 4096)
            target = probe
        fd = os.open(target, os.O_RDONLY | flag)
        try:
            buf = mmap.mmap(-1, 4096)
            return os.preadv(fd, [buf], 0) == 4096
        finally:
            os.close(fd)
    except OSError:
        return False
    finally:
        if probe is not None and probe.exists():
            probe.unlink()


@contextmanager
def cpu_time_around():
    """The CPU seconds (user + system) of this process and its reaped children over the block, and
    its wall seconds: {"cpu_s", "wall_s"} filled when the block ends (every rank, server and trainer
    of a run is a child that has ended by then)."""
    out = {"cpu_s": None, "wall_s": None}
    c0, t0 = process_cpu_seconds(), time.perf_counter()
    yield out
    out["cpu_s"], out["wall_s"] = process_cpu_seconds() - c0, time.perf_counter() - t0


def process_cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and its reaped children so far."""
    import resource

    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime
