"""The carried folder of the GPU call: wheels of what the GPU machine's image lacks (make gpu-carry).

    python tools/gpu_carry.py --out .gpu-carry [--python-version 3.12] [--check]

Downloads, for CPython PYVER on manylinux x86-64, one wheel of each name in tools/gpu-carry.txt at
its version in requirements.txt (pip download --no-deps --only-binary=:all:), removes any other
file from the folder (pip refuses two versions of one package), then checks that every requirement
of every carried wheel (its METADATA's Requires-Dist, extras left out, markers read for PYVER) is
either carried or in the image's list (tools/gpu-image-packages.txt), and that the folder together
with the working tree (tracked and untracked, not ignored, files: what a device call sends) stays
under the call's 64 MiB. `--check` downloads nothing and checks the folder as it is. Prints the
folder's files and sizes; exit status 1 on any problem, named.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CARRY_LIST = REPO / "tools" / "gpu-carry.txt"
IMAGE_LIST = REPO / "tools" / "gpu-image-packages.txt"
REQUIREMENTS = REPO / "requirements.txt"
LIMIT_MIB = 64  # a device call's working tree, carried paths included (the device tool's limit)
# manylinux tags pip matches exactly (the device tool's notes); the image runs glibc >= 2.28
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64"]


def norm(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_list(path: Path) -> list[str]:
    return [norm(ln.split("#")[0].strip()) for ln in path.read_text().splitlines() if ln.split("#")[0].strip()]


def read_pins(path: Path = REQUIREMENTS) -> dict[str, str]:
    pins = {}
    for ln in path.read_text().splitlines():
        ln = ln.split("#")[0].strip()
        if "==" in ln:
            name, version = ln.split("==", 1)
            pins[norm(name)] = version.strip()
    return pins


def wheel_name_version(path: Path) -> tuple[str, str]:
    name, version = path.name.split("-")[:2]
    return norm(name), version


def wanted(names=None, pins=None) -> dict[str, str]:
    names = read_list(CARRY_LIST) if names is None else names
    pins = read_pins() if pins is None else pins
    missing = [n for n in names if n not in pins]
    if missing:
        raise SystemExit(f"{REQUIREMENTS}: no '==' pin for {', '.join(missing)} (named in {CARRY_LIST})")
    return {n: pins[n] for n in names}


def download(out: Path, pyver: str, want: dict[str, str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    keep = set(want.items())
    for f in out.iterdir():  # one version of each, nothing else
        if not (f.suffix == ".whl" and wheel_name_version(f) in keep):
            f.unlink()
    have = {wheel_name_version(f) for f in out.glob("*.whl")}
    todo = [f"{n}=={v}" for n, v in want.items() if (n, v) not in have]
    if not todo:
        return
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
           "--only-binary=:all:", "--python-version", pyver, "--implementation", "cp",
           *[a for p in PLATFORMS for a in ("--platform", p)], "-d", str(out), *todo]
    subprocess.run(cmd, check=True)


def _requirement(spec: str):
    try:
        from packaging.requirements import Requirement
    except ImportError:  # pip's own copy
        from pip._vendor.packaging.requirements import Requirement
    return Requirement(spec)


def requires(wheel: Path, pyver: str) -> list[str]:
    """The distributions a wheel needs on CPython `pyver` (extras left out)."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    env = {"python_version": pyver, "python_full_version": pyver + ".0", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
           "platform_python_implementation": "CPython", "os_name": "posix", "extra": ""}
    out = []
    for line in text.splitlines():
        if line.startswith("Requires-Dist:"):
            req = _requirement(line.split(":", 1)[1].strip())
            if req.marker is None or req.marker.evaluate(env):
                out.append(norm(req.name))
    return out


def tree_bytes(repo: Path = REPO) -> int:
    """What a device call sends besides the carried paths: tracked and untracked, not ignored, files."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo,
                           capture_output=True, check=True).stdout.decode().split("\0")
    return sum((repo / f).stat().st_size for f in files if f and (repo / f).is_file())


def check(out: Path, pyver: str, want: dict[str, str], image=None) -> tuple[list[str], dict]:
    """(problems, facts) of the folder `out`."""
    image = set(read_list(IMAGE_LIST)) if image is None else image
    problems = []
    wheels = sorted(out.glob("*.whl")) if out.is_dir() else []
    got = {wheel_name_version(w): w for w in wheels}
    for n, v in want.items():
        if (n, v) not in got:
            problems.append(f"{out}: no wheel of {n}=={v} (make gpu-carry)")
    extra = [w.name for w in (out.iterdir() if out.is_dir() else []) if w.suffix != ".whl" or
             wheel_name_version(w) not in want.items()]
    if extra:
        problems.append(f"{out}: files that are not the carried wheels: {', '.join(sorted(extra))}")
    tag = f"cp{pyver.replace('.', '')}"
    for w in wheels:
        if "-none-any" not in w.name and f"-{tag}-" not in w.name and "-abi3-" not in w.name:
            problems.append(f"{w.name}: not a wheel for {tag} or pure Python")
        unmet = [r for r in requires(w, pyver) if r not in want and r not in image]
        if unmet:
            problems.append(f"{w.name} requires {', '.join(unmet)}: neither carried ({CARRY_LIST.name}) nor in "
                            f"the image ({IMAGE_LIST.name})")
    carry, tree = sum(w.stat().st_size for w in wheels), tree_bytes()
    if carry + tree > LIMIT_MIB * 2**20:
        problems.append(f"{out} ({carry / 2**20:.1f} MiB) + the working tree ({tree / 2**20:.1f} MiB) = "
                        f"{(carry + tree) / 2**20:.1f} MiB, over a device call's {LIMIT_MIB} MiB")
    facts = {"files": {w.name: w.stat().st_size for w in wheels}, "carry_bytes": carry, "tree_bytes": tree}
    return problems, facts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / ".gpu-carry")
    ap.add_argument("--python-version", default="3.12", help="CPython X.Y of the machine the wheels are for")
    ap.add_argument("--check", action="store_true", help="download nothing; check the folder as it is")
    a = ap.parse_args(argv)
    want = wanted()
    if not a.check:
        download(a.out, a.python_version, want)
    problems, facts = check(a.out, a.python_version, want)
    for name, size in facts["files"].items():
        print(f"  {size / 2**20:6.2f} MiB  {name}")
    print(f"{a.out}: {len(facts['files'])} wheels, {facts['carry_bytes'] / 2**20:.1f} MiB; with the working tree "
          f"({facts['tree_bytes'] / 2**20:.1f} MiB): {(facts['carry_bytes'] + facts['tree_bytes']) / 2**20:.1f} MiB "
          f"of a device call's {LIMIT_MIB} MiB")
    for p in problems:
        print(f"gpu-carry: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
