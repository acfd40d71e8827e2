"""A Python environment that holds only what the GPU machine's image holds, and no network.

    python tools/gpu_image_env.py DIR      (prints DIR's python)

The rehearsal of the GPU call (tests/test_gpu_check_rehearsal.py) runs tools/gpu-check.sh with this
Python. A fresh venv (no pip of its own, no system site-packages) whose site-packages links, from
the running Python's site-packages, each distribution named in tools/gpu-image-packages.txt (its
files' top-level entries, as its RECORD lists them, and its .dist-info): so dgl, pydantic,
jsonschema, snakemake and asv are absent, as there, until the script installs the carried wheels.
A `.pth` line makes every process of it refuse connections to anything but the loopback (the GPU
machine reaches nothing outside it). Versions are this machine's (Python 3.11, CPU torch), not the
image's: the rehearsal checks what is there, not how it behaves.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_carry import IMAGE_LIST, norm, read_list  # noqa: E402

OFFLINE = '''"""No network but the loopback, as on the GPU machine (tools/gpu_image_env.py)."""
import errno
import ipaddress
import socket

_MESSAGE = "no network on the GPU machine (the rehearsal's environment refuses %s)"


def _local(host):
    if host in (None, "", "localhost"):
        return True
    try:
        ip = ipaddress.ip_address(str(host).split("%")[0])
    except ValueError:
        return False
    return ip.is_loopback or ip.is_unspecified


def _check(address):
    if isinstance(address, tuple) and not _local(address[0]):
        raise OSError(errno.ENETUNREACH, _MESSAGE % (address[0],))


_connect, _connect_ex, _getaddrinfo = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo


def connect(self, address):
    _check(address)
    return _connect(self, address)


def connect_ex(self, address):
    _check(address)
    return _connect_ex(self, address)


def getaddrinfo(host, *args, **kwargs):
    if not _local(host.decode() if isinstance(host, bytes) else host):
        raise socket.gaierror(socket.EAI_NONAME, _MESSAGE % (host,))
    return _getaddrinfo(host, *args, **kwargs)


socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo = connect, connect_ex, getaddrinfo
'''


def _top_levels(dist) -> set[str]:
    """The top-level files and folders of an installed distribution (its .dist-info included)."""
    out = set()
    for f in dist.files or []:
        parts = Path(str(f)).parts
        if parts and parts[0] not in ("..", "__pycache__") and not Path(str(f)).is_absolute():
            out.add(parts[0])
    if not dist.files:
        top = dist.read_text("top_level.txt") or ""
        out |= {t.strip() for t in top.splitlines() if t.strip()}
    return out


def build(dest: Path, source_site: Path | None = None, image: set[str] | None = None) -> Path:
    """Make the environment at `dest` (which must not exist); returns its python."""
    dest = Path(dest)
    source_site = Path(source_site or sysconfig.get_paths()["purelib"])
    image = set(read_list(IMAGE_LIST)) if image is None else image
    base = getattr(sys, "_base_executable", None) or sys.executable
    subprocess.run([base, "-m", "venv", "--without-pip", str(dest)], check=True)
    python = dest / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    linked = []
    for dist in importlib.metadata.distributions(path=[str(source_site)]):
        name = norm(dist.metadata["Name"] or "")
        if name not in image:
            continue
        linked.append(name)
        for entry in _top_levels(dist):
            src, dst = source_site / entry, site / entry
            if src.exists() and not os.path.lexists(dst):
                dst.symlink_to(src)
    (site / "_gpu_image_offline.py").write_text(OFFLINE)
    (site / "zz_gpu_image_offline.pth").write_text("import _gpu_image_offline\n")
    (dest / "linked.txt").write_text("\n".join(sorted(set(linked))) + "\n")
    return python


if __name__ == "__main__":
    print(build(Path(sys.argv[1])))
