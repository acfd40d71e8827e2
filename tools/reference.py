#!/usr/bin/env python3
"""Build reports/reference/ (make reference; docs/workflow.md, "Comparing with the reference").

    tools/reference.py run [--report reports/synthetic-small] -- make reproduce [ARGS]
        on a clean tree with no results of that dataset yet: runs the reproduction, timing it
        from the start (the .venv set-up included when it is built), then `take`
    tools/reference.py take REPORT --wall-s SECONDS [--allow-dirty]
        a finished run's report: copies it in and writes reports/reference/reference.json
    tools/reference.py check
        exit status 1 when a commit after the reference's changed what moves a figure (WATCHED)
        and the reference README's note section does not list it; 2 when a shallow clone lacks it

reference.json records what the figures depend on: the commit the run was built at (the run's
machine.json `git_commit`, `git rev-parse HEAD` with `-dirty` when tracked files differed: a dirty
run is refused unless --allow-dirty, and then recorded as dirty), when it ran, its wall time, the
command, the storage device, fio's measured random-read IOPS, and how the memory that could cache
the dataset was bounded. tests/test_reference_fresh.py fails when a later commit changed
lsm_gnn/, baselines/, workflow/ or config/ and the reference was not rebuilt (or the reference
README's "Changes since the reference" section does not list it with its reason). Standard
library only: it runs before .venv exists."""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "reports" / "reference"
COPIED = ("report.md", "figures.json", "timings.json", "machine.json", "sections", "figures")
SCHEMA = "lsm-gnn-reference"
# what moves a figure: a commit after the reference's that changed one of these must rebuild it
WATCHED = ("lsm_gnn", "baselines", "workflow", "config")
# the reference README's section listing such commits with why no figure can have moved
NOTE_HEADING = "## Changes since the reference that cannot move a figure"
NOTE_LINE_RE = re.compile(r"^- `(?P<commit>[0-9a-f]{7,40})`:? (?P<why>\S.*)$")


def _write_json(path: Path, obj) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def _clean() -> bool:
    return not _git("status", "--porcelain", "--untracked-files=no")


def fio_iops(results: Path) -> dict | None:
    """fio's random 4 KiB read rate from the storage benchmark of the run (results/<tag>/storage)."""
    p = results / "storage" / "bench.json"
    if not p.is_file():
        return None
    bench = json.loads(p.read_text())
    fio = bench.get("fio") or {}
    rnd = fio.get("random") or {}
    if not rnd.get("available"):
        return {"available": False, "reason": rnd.get("reason") or "fio did not run"}
    return {"available": True, "random_4k_iops": rnd.get("iops"), 
            "source": str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)}


def memory_bound(results: Path, machine: dict) -> dict:
    """How the memory that could cache the dataset was bounded in the timed baseline runs: the
    feature bytes against the machine's memory, each system's reader, and the mmap runs' page-cache
    cap (lsm_gnn/storage/memcap.py: a cgroup limit, or uncapped when none could be made)."""
    out = {"machine_memory_bytes": (machine.get("hardware") or {}).get("memory_bytes")}
    meta = sorted(glob.glob(str(results.parent.parent / "data" / results.name / "metadata.json")))
    if meta:
        fb = json.loads(Path(meta[0]).read_text()).get("features", {}).get("file_bytes")
        out["feature_bytes"] = fb
        if fb and out["machine_memory_bytes"]:
            out["feature_bytes_vs_memory"] = fb / out["machine_memory_bytes"]
    systems: dict[str, dict] = {}
    for rec in sorted((results / "baselines").glob("*-r*.json")):
        try:
            r = json.loads(rec.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        system = (r.get("config") or {}).get("system") or rec.name.split("-")[0]
        reader = ((r.get("config") or {}).get("storage") or {}).get("reader")
        cap = (r.get("metrics") or {}).get("page_cache_cap") or {}
        s = systems.setdefault(system, {"reader": reader, "runs": 0, "page_cache_capped": set()})
        s["runs"] += 1
        if cap:
            s["page_cache_capped"].add(f"{cap.get('method')} (capped: {bool(cap.get('capped'))})")
    for s in systems.values():
        s["page_cache_capped"] = sorted(s["page_cache_capped"])
    out["systems"] = systems
    out["how"] = ("the cached systems and the direct loader read with O_DIRECT (no page cache); the mmap "
                  "loader's page cache is capped at the same feature memory by a cgroup limit "
                  "(metrics.page_cache_cap of each run); the in-memory ideal and Dist-DGL hold every "
                  "feature in RAM by design")
    return out


def take(report: Path, wall_s: float, allow_dirty: bool, command: str | None) -> dict:
    if not ((report / "figures.json").is_file() and (report / "report.md").is_file()):
        sys.exit(f"{report}: no finished report (make reproduce first)")
    machine = json.loads((report / "machine.json").read_text())
    commit = machine.get("git_commit") or ""
    dirty = commit.endswith("-dirty")
    if dirty and not allow_dirty:
        sys.exit(f"{report}/machine.json: the run was built on a dirty tree ({commit}); rerun on a clean "
                 "one, or pass --allow-dirty to record it as dirty")
    if not commit:
        sys.exit(f"{report}/machine.json: no git_commit (the run was not made in a git checkout)")
    results = ROOT / "results" / report.name
    DEST.mkdir(parents=True, exist_ok=True)
    for name in ("sections", "figures"):
        shutil.rmtree(DEST / name, ignore_errors=True)
    for name in COPIED:
        src = report / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, DEST / name)
    ref = {"schema": SCHEMA, "version": 1,
           "commit": commit.removesuffix("-dirty"), "dirty": dirty,
           "built": machine.get("written"),
           "date": (machine.get("written") or "")[:10],
           "wall_s": float(wall_s), "command": command or "make reproduce",
           "report": str(report.relative_to(ROOT)) if report.resolve().is_relative_to(ROOT) else str(report),
           "storage": {**((machine.get("hardware") or {}).get("storage") or {}), "fio": fio_iops(results)},
           "memory": memory_bound(results, machine)}
    _write_json(DEST / "reference.json", ref)
    print(f"reports/reference: built at {ref['commit'][:10]}{' (dirty)' if dirty else ''}, "
          f"{ref['date']}, wall {wall_s / 60:.1f} min; now `lsm-gnn report quote` fills the quoted numbers")
    return ref


def run(report: Path, cmd: list[str], allow_dirty: bool) -> dict:
    if not _clean() and not allow_dirty:
        sys.exit("the working tree has uncommitted changes: the reference must be built at a commit "
                 "(commit or stash them, or --allow-dirty)")
    for stale in (ROOT / "results" / report.name, report):
        if stale.exists():
            sys.exit(f"{stale} exists: the reference's wall time is a whole run's; move it away first")
    t0 = time.monotonic()
    rc = subprocess.call(cmd, cwd=ROOT)
    wall = time.monotonic() - t0
    if rc:
        sys.exit(f"{' '.join(cmd)}: exit status {rc}")
    return take(report, wall, allow_dirty, " ".join(cmd))


def reference_commit(root: Path = ROOT) -> tuple[str, bool]:
    """(commit, dirty) the reference was built at: reference.json, else its machine.json."""
    ref = root / "reports" / "reference"
    if (ref / "reference.json").is_file():
        r = json.loads((ref / "reference.json").read_text())
        return r["commit"], bool(r.get("dirty"))
    c = json.loads((ref / "machine.json").read_text()).get("git_commit") or ""
    return c.removesuffix("-dirty"), c.endswith("-dirty")


def noted_commits(readme: str) -> dict[str, str]:
    """{commit prefix: why} from the reference README's NOTE_HEADING section."""
    out, inside = {}, False
    for line in readme.splitlines():
        if line.startswith("## "):
            inside = line.strip() == NOTE_HEADING
            continue
        m = NOTE_LINE_RE.match(line.strip()) if inside else None
        if m:
            out[m["commit"]] = m["why"].strip()
    return out


def stale(root: Path = ROOT) -> dict:
    """What stands between the reference and HEAD: {"commit", "dirty", "found" (whether the commit
    is in this clone's history), "shallow", "changed" (commits after it touching WATCHED, each
    (hash, subject, paths)), "unnoted" (those the README does not list)}."""
    git = lambda *a: subprocess.run(["git", "-C", str(root), *a], capture_output=True, text=True)  # noqa: E731
    commit, dirty = reference_commit(root)
    shallow = git("rev-parse", "--is-shallow-repository").stdout.strip() == "true"
    found = git("cat-file", "-e", f"{commit}^{{commit}}").returncode == 0
    res = {"commit": commit, "dirty": dirty, "found": found, "shallow": shallow, "changed": [], "unnoted": []}
    if not found:
        return res
    # a merge counts by what it changed itself (a conflict resolved: --cc lists the files that differ
    # from every parent); the commits it brings in are listed on their own
    log = git("log", "--cc", "--format=%x00%H %s", "--name-only", f"{commit}..HEAD", "--", *WATCHED).stdout
    for chunk in log.split("\0")[1:]:
        head, *paths = [x for x in chunk.splitlines() if x.strip()]
        h, _, subject = head.partition(" ")
        paths = [p for p in paths if p.split("/")[0] in WATCHED]
        if paths:
            res["changed"].append((h, subject, paths))
    notes = noted_commits((root / "reports" / "reference" / "README.md").read_text())
    res["unnoted"] = [c for c in res["changed"] if not any(c[0].startswith(n) for n in notes)]
    return res


def check(root: Path = ROOT) -> int:
    r = stale(root)
    if r["dirty"]:
        print(f"reports/reference was built on a dirty tree at {r['commit'][:10]}: rebuild it (make reference)")
        return 1
    if not r["found"]:
        print(f"reports/reference was built at {r['commit'][:10]}, which is not in this clone's history"
              + (" (a shallow clone: fetch more history)" if r["shallow"] else ""))
        return 2 if r["shallow"] else 1
    if r["unnoted"]:
        print(f"reports/reference was built at {r['commit'][:10]}; {len(r['unnoted'])} later commit(s) changed "
              f"{', '.join(WATCHED)} without it being rebuilt (make reference) or listed under "
              f"\"{NOTE_HEADING[3:]}\" in reports/reference/README.md:")
        for h, subject, paths in r["unnoted"]:
            print(f"  {h[:10]} {subject[:90]} ({', '.join(paths[:4])}{', ...' if len(paths) > 4 else ''})")
        return 1
    print(f"reports/reference is current: built at {r['commit'][:10]}, {len(r['changed'])} later change(s), all noted")
    return 0


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    t = sub.add_parser("take")
    t.add_argument("report", type=Path)
    t.add_argument("--wall-s", type=float, required=True, help="the run's wall time (a fresh clone's `make reproduce`)")
    t.add_argument("--allow-dirty", action="store_true")
    t.add_argument("--command", default=None)
    r = sub.add_parser("run")
    r.add_argument("--report", type=Path, default=ROOT / "reports" / "synthetic-small")
    r.add_argument("--allow-dirty", action="store_true")
    r.add_argument("cmd", nargs=argparse.REMAINDER)
    sub.add_parser("check", help="exit 1 when a commit after the reference's changed what moves a figure")
    a = ap.parse_args(argv)
    if a.what == "check":
        sys.exit(check())
    if a.what == "take":
        take(a.report.resolve(), a.wall_s, a.allow_dirty, a.command)
    else:
        cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
        run(a.report.resolve(), cmd or ["make", "reproduce"], a.allow_dirty)


if __name__ == "__main__":
    main()
