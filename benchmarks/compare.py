"""Compare two commits with asv: behaviour changes (counts) apart from performance changes (timings).

    python benchmarks/compare.py A B [B2 ...] [--factor 1.15] [--cpu 1] [--bench REGEX] [--no-run]

(`make bench-compare A=... B=...` runs it.) It sets up asv's machine record (`asv machine --yes`,
so a first run works), then runs the rounds itself: round r is one `asv run -a rounds=1` of every
benchmark at every commit, pinned to one CPU (`--cpu-affinity`), A first in the even rounds and
last in the odd ones (A B, B A, A B, ...: a commit that ran first in every round would meet the
VM's drift within a round always on the same side), the rounds after the first appending their
samples to the first's (`--append-samples`). Then it reads the result files and prints, for B
against A (and for each further commit against A, all measured in the same rounds):

- behaviour changes: a `track_` figure (a count of a deterministic replay, a ratio of such counts,
  read amplification) that is not exactly equal at A and B, or a benchmark that ran at one commit
  and failed or is missing at the other;
- performance changes: a `time_` benchmark whose median at B is more than `factor` times slower
  (or faster) than at A, whose fastest sample moved by the same factor, and whose samples asv's
  own test calls different (Mann-Whitney U, p < 0.002, or non-overlapping 99 % intervals when
  there are too few samples).

Exit status: 0 nothing changed, 1 performance changes only, 2 behaviour changes only, 3 both.
This file is not a benchmark (no `time_`/`track_` names): asv imports it while discovering the
suite and finds nothing in it.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

# The threshold this machine's noise supports: docs/benchmarks.md (A/A spread of the medians).
DEFAULT_FACTOR = 1.15
DEFAULT_CPU = "1"
PERFORMANCE, BEHAVIOUR = 1, 2


@dataclass
class Entry:
    """One benchmark at one parameter combination of one commit."""

    value: float | None  # asv's result: the median of the samples for time_, the value for track_
    samples: list | None = None
    stats: dict | None = None
    started_at: int = 0  # ms since the epoch (asv's column)


@dataclass
class Change:
    name: str
    a: float | None
    b: float | None
    ratio: float | None = None
    p: float | None = None
    note: str = ""


def _is_missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def load_results(path: str) -> dict[str, Entry]:
    """{"module.Class.method(param, ...)": Entry} from one asv result file (format version 2)."""
    with open(path) as f:
        doc = json.load(f)
    if doc.get("version") != 2:
        raise ValueError(f"{path}: expected an asv result file of version 2, found version {doc.get('version')!r}")
    columns = doc.get("result_columns")
    if not isinstance(columns, list) or "result" not in columns:
        raise ValueError(f"{path}: expected 'result_columns' listing 'result', found {columns!r}")
    out: dict[str, Entry] = {}
    for name, row in doc.get("results", {}).items():
        rec = dict(zip(columns, row))
        params = rec.get("params") or []
        values = rec.get("result")
        combos = _combinations(params)
        if not isinstance(values, list):  # a benchmark that failed as a whole stores null
            values = [None] * len(combos)
        samples = rec.get("samples") or [None] * len(values)
        for i, combo in enumerate(combos):
            key = f"{name}({', '.join(combo)})" if combo else name
            stats = None
            if rec.get("stats_ci_99_a") is not None and i < len(rec["stats_ci_99_a"]):
                stats = {"ci_99_a": rec["stats_ci_99_a"][i], "ci_99_b": rec["stats_ci_99_b"][i],
                         "repeat": (rec.get("stats_repeat") or [0] * len(values))[i]}
            out[key] = Entry(values[i] if i < len(values) else None,
                             samples[i] if i < len(samples) else None, stats, int(rec.get("started_at") or 0))
    return out


def _combinations(params: list) -> list[tuple]:
    combos: list[tuple] = [()]
    for values in params:
        combos = [c + (str(v),) for c in combos for v in values]
    return combos


def _kind(key: str) -> str:
    method = key.split("(")[0].rsplit(".", 1)[-1]
    return method.split("_")[0]


def _different(a: Entry, b: Entry) -> tuple[bool, float | None]:
    """asv's own significance test of two timings, and the Mann-Whitney p-value when it has samples."""
    from asv import _stats

    p = None
    if a.samples and b.samples:
        sa = [x for x in a.samples if not _is_missing(x)]
        sb = [x for x in b.samples if not _is_missing(x)]
        if sa and sb:
            p = _stats.mann_whitney_u(sa, sb)[1]
    if not (a.stats and b.stats) or a.stats.get("repeat") == 1 or b.stats.get("repeat") == 1:
        return True, p  # one sample: asv compares by the factor alone
    return bool(_stats.is_different(a.samples, b.samples, a.stats, b.stats)), p


def compare(a: dict[str, Entry], b: dict[str, Entry], factor: float, timings: list | None = None,
            since: int = 0) -> tuple[list[Change], list[Change], list[Change]]:
    """(behaviour changes, slower, faster) between result sets a and b; every timing's Change is
    appended to `timings` when given (the noise of an A/A pair). Only benchmarks stored at both
    commits and, with `since` (ms since the epoch), measured at both since then are compared: a
    benchmark that did not run (-b) or ran in an earlier, interrupted run is no change."""
    behaviour, slower, faster = [], [], []
    for key in sorted(set(a) & set(b)):
        ea, eb = a[key], b[key]
        if ea.started_at < since or eb.started_at < since:
            continue
        if _is_missing(ea.value) or _is_missing(eb.value):
            if not (_is_missing(ea.value) and _is_missing(eb.value)):
                behaviour.append(Change(key, ea.value, eb.value, note="failed or missing at one commit"))
            continue
        if _kind(key) == "track":
            if ea.value != eb.value:
                behaviour.append(Change(key, ea.value, eb.value, eb.value / ea.value if ea.value else None))
            continue
        if _kind(key) not in ("time",):
            continue
        ratio = eb.value / ea.value
        low = [min(x for x in e.samples if not _is_missing(x)) if e.samples else e.value for e in (ea, eb)]
        low_ratio = low[1] / low[0]
        different, p = _different(ea, eb)
        change = Change(key, ea.value, eb.value, ratio, p, f"fastest sample x{low_ratio:.2f}")
        if timings is not None:
            timings.append(change)
        if different and ratio > factor and low_ratio > factor:
            slower.append(change)
        elif different and ratio < 1 / factor and low_ratio < 1 / factor:
            faster.append(change)
    return behaviour, slower, faster


def _fmt(v) -> str:
    if _is_missing(v):
        return "failed"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _seconds(v) -> str:
    if _is_missing(v):
        return "failed"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if v >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v * 1e9:.3g} ns"


def _timing_line(c: Change, digits: int = 2) -> str:
    p = f"p = {c.p:.2g}" if c.p is not None else "p n/a"
    return f"x{c.ratio:.{digits}f}  {c.name}: {_seconds(c.a)} -> {_seconds(c.b)}  ({p}, {c.note})"


def report(behaviour: list[Change], slower: list[Change], faster: list[Change], factor: float,
           out=None) -> int:
    """Print the two sections; return the exit status (PERFORMANCE | BEHAVIOUR bits)."""
    out = out or sys.stdout
    print(f"Behaviour changes (track_ figures must be exactly equal): {len(behaviour)}", file=out)
    for c in behaviour:
        print(f"  {c.name}: {_fmt(c.a)} -> {_fmt(c.b)}" + (f"  ({c.note})" if c.note else ""), file=out)
    print(f"Performance changes (time_, factor {factor}, asv's significance test): "
          f"{len(slower)} slower, {len(faster)} faster", file=out)
    for label, changes in (("slower", slower), ("faster", faster)):
        for c in changes:
            print(f"  {label} {_timing_line(c)}", file=out)
    return (BEHAVIOUR if behaviour else 0) | (PERFORMANCE if slower or faster else 0)


def _git(*args) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout.strip()


def result_file(results_dir: str, machine: str, commit: str) -> str:
    """The asv result file of `commit` on `machine` (exactly one environment is configured)."""
    paths = sorted(glob.glob(os.path.join(results_dir, machine, f"{commit[:8]}-*.json")))
    if not paths:
        raise FileNotFoundError(f"no asv result for commit {commit[:8]} in {os.path.join(results_dir, machine)}")
    if len(paths) > 1:
        raise ValueError(f"{len(paths)} asv result files for commit {commit[:8]} (one environment expected): {paths}")
    return paths[0]


def default_rounds() -> int:
    """The rounds of a comparison without --rounds: benchmarks/_timing.py's (one place)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_timing", os.path.join(os.path.dirname(__file__), "_timing.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return int(mod.Timed.rounds)


def round_orders(commits: list[str], rounds: int) -> list[list[str]]:
    """The commits' order in each round: as given in the even rounds, reversed in the odd ones."""
    if rounds < 1:
        raise SystemExit(f"--rounds: expected a positive integer, found {rounds}")
    return [list(commits) if r % 2 == 0 else list(reversed(commits)) for r in range(rounds)]


def asv_run_command(args, hashfile: str, append: bool = False) -> list[str]:
    """One round's `asv run`: one process per benchmark at every commit of `hashfile`, in the file's
    order, on one CPU; `append` (the rounds after the first): its samples join the earlier rounds'
    (asv --append-samples), and only `time_` benchmarks run (a `track_` count is exact: once is
    enough). asv ORs its -b patterns and matches each with re.search against the full name."""
    cmd = [args.asv, "run", "--machine", args.machine, "--no-interleave-rounds", "--record-samples",
           "--cpu-affinity", args.cpu, "--show-stderr", "-a", "rounds=1", f"HASHFILE:{hashfile}"]
    if append:
        cmd.insert(cmd.index("--record-samples"), "--append-samples")
    patterns = list(args.bench)
    if append:
        patterns = [rf"^(?=.*(?:{p})).*\.time_" for p in patterns] or [r"\.time_"]
    for pattern in patterns:
        cmd += ["-b", pattern]
    return cmd


def run_rounds(args, commits: list[str]) -> list[list[str]]:
    """Every round's `asv run` (round_orders); returns the commands run."""
    rounds = args.rounds if args.rounds is not None else default_rounds()
    cmds = []
    for r, order in enumerate(round_orders(commits, rounds)):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("".join(f"{c}\n" for c in order))
        cmd = asv_run_command(args, f.name, append=r > 0)
        try:
            print(f"[bench-compare] round {r + 1}/{rounds}: " + " then ".join(c[:8] for c in order), flush=True)
            subprocess.run(cmd, check=False)
        finally:
            os.unlink(f.name)
        cmds.append(cmd)
    return cmds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a", help="the reference commit")
    ap.add_argument("b", nargs="+", help="the commit compared with it (more: each compared with A)")
    ap.add_argument("--factor", type=float, default=DEFAULT_FACTOR, help="timing ratio that counts as a change")
    ap.add_argument("--cpu", default=DEFAULT_CPU, help="CPU set for the benchmark processes (asv --cpu-affinity)")
    ap.add_argument("--bench", "-b", action="append", default=[], help="only benchmarks matching (asv -b)")
    ap.add_argument("--asv", default=os.path.join(os.path.dirname(sys.executable), "asv"), help="the asv command")
    ap.add_argument("--machine", default=socket.gethostname(), help="asv machine name")
    ap.add_argument("--rounds", type=int, default=None,
                    help="rounds, one process per benchmark and commit each, the commits' order alternating "
                         "(default benchmarks/_timing.py's)")
    ap.add_argument("--no-run", action="store_true", help="compare the stored results only")
    ap.add_argument("--all", action="store_true", help="also list every timing's ratio (the noise of an A/A pair)")
    args = ap.parse_args(argv)
    a = _git("rev-parse", "--verify", f"{args.a}^{{commit}}")
    since = 0 if args.no_run else int(time.time() * 1000)
    others = [_git("rev-parse", "--verify", f"{b}^{{commit}}") for b in args.b]
    if not args.no_run:
        subprocess.run([args.asv, "machine", "--yes", "--machine", args.machine], check=True,
                       stdout=subprocess.DEVNULL)
        run_rounds(args, [a, *others])
    results_dir = os.path.join(".asv", "results")
    ra = load_results(result_file(results_dir, args.machine, a))
    status = 0
    for name, b in zip(args.b, others):
        rb = load_results(result_file(results_dir, args.machine, b))
        print(f"\nasv comparison {a[:8]} (A, {args.a}) -> {b[:8]} (B, {name}) on {args.machine}")
        timings: list[Change] = []
        status |= report(*compare(ra, rb, args.factor, timings, since), args.factor)
        if args.all:
            print("All timings (B / A):")
            for c in timings:
                print(f"  {_timing_line(c, 3)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
