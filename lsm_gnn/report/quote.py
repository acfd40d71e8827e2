"""One home per number: the figures the README and docs quote from a run are filled from their
generated source (the reference report's JSON, or a benchmark's JSON committed in the repository)
by `lsm-gnn report quote`, and `lsm-gnn report quote --check` (tests/test_report_quote.py) fails
when a quoted value differs from its source or names a figure the source lacks.

Two kinds of marker, both invisible in rendered markdown:

- inline: ``<!-- q SOURCE:PATH|FMT -->VALUE<!-- /q -->``. SOURCE is one of ``SOURCES`` (the files
  of reports/reference/) or a repository-relative path to a JSON file; PATH walks the JSON object
  with ``/`` between keys (keys may hold spaces and dots: ``systems/lsm d2 c0.1 [a100]/runs``) and
  list indexes; FMT is how the value is written (``FORMATS``, or a Python format spec: ``.2f``,
  ``,.0f``).
- generated table: ``<!-- table NAME -->`` ... ``<!-- /table -->``: the lines between are the
  table ``TABLES[NAME]`` makes from the reference.

A number a document quotes that no run generates (a dated measurement) says where it comes from
in a line ``**Dated**: commit `HASH`, YYYY-MM-DD, `COMMAND``` above it; `check_dated` holds those
lines to naming all three (docs/workflow.md, "Where a quoted number comes from")."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from lsm_gnn.utils.errors import DataError

REFERENCE_DIR = "reports/reference"
# the reference's files a marker names by a short name
SOURCES = {"figures": "figures.json", "timings": "timings.json", "machine": "machine.json",
           "reference": "reference.json"}
# the documents whose quoted numbers are filled and checked
DOCUMENTS = ("README.md", "docs/*.md", "config/README.md")

# a marker right after a backtick is an example in code (docs/workflow.md), not a marker
INLINE_RE = re.compile(r"(?<!`)<!-- q (?P<src>[^:\s]+):(?P<path>[^|>]+?)\|(?P<fmt>[^ >]+) -->(?P<value>.*?)<!-- /q -->")
# a table's lines are indented as its opening marker is (a table inside a list item)
TABLE_RE = re.compile(r"^(?P<open>(?P<indent>[ ]*)<!-- table (?P<name>[A-Za-z0-9_-]+) -->\n)(?P<body>.*?)"
                      r"(?P<close>[ ]*<!-- /table -->)", re.S | re.M)
# a dated measurement's line: **Dated**: commit `HASH`, YYYY-MM-DD, `COMMAND`
DATED_RE = re.compile(r"^\*\*Dated\*\*:(?P<rest>.*)$", re.M)
DATED_PARTS_RE = re.compile(r"^\s*commit `(?P<commit>[0-9a-f]{7,40})`, (?P<date>\d{4}-\d{2}-\d{2})\b.*?, `(?P<command>[^`]+)`")


def _minsec(s: float) -> str:
    m, sec = divmod(int(round(float(s))), 60)
    return f"{m} min {sec:02d} s" if m else f"{sec} s"


# named formats: seconds as minutes, shares as percentages, ratios as multiples
FORMATS = {
    "minsec": _minsec,                                  # 1279.6 -> "21 min 20 s"
    "minutes": lambda s: f"{int(round(float(s) / 60))}",  # 1279.6 -> "21"
    "pct0": lambda v: f"{100 * float(v):.0f}",          # 0.168 -> "17"
    "pct1": lambda v: f"{100 * float(v):.1f}",          # 0.168 -> "16.8"
    "short": lambda v: str(v)[:7],                      # a commit hash
    "str": str,
}


def format_value(value, fmt: str) -> str:
    if fmt in FORMATS:
        return FORMATS[fmt](value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"format {fmt!r} needs a number, found {type(value).__name__} {value!r}")
    return format(value, fmt)


@dataclass
class Problem:
    file: str
    line: int
    what: str  # "differs" | "missing" | "dated"
    marker: str
    found: str = ""
    expected: str = ""

    def __str__(self) -> str:
        if self.what == "differs":
            return f"{self.file}:{self.line}: {self.marker}: quoted {self.found!r}, source says {self.expected!r}"
        return f"{self.file}:{self.line}: {self.marker}: {self.expected}"


class Sources:
    """The JSON files markers name, read once. `root`: the repository."""

    def __init__(self, root: str | Path, reference: str | Path | None = None):
        self.root = Path(root)
        self.reference = Path(reference) if reference else self.root / REFERENCE_DIR
        self._cache: dict[str, dict] = {}

    def path_of(self, src: str) -> Path:
        if src in SOURCES:
            return self.reference / SOURCES[src]
        if src.endswith(".json"):
            return self.root / src
        raise KeyError(f"unknown source {src!r}: expected one of {', '.join(SOURCES)} or a path to a .json file")

    def load(self, src: str) -> dict:
        if src not in self._cache:
            p = self.path_of(src)
            if not p.is_file():
                raise KeyError(f"source {src!r}: no file {p}")
            try:
                self._cache[src] = json.loads(p.read_text())
            except json.JSONDecodeError as e:
                raise DataError(p, f"not JSON ({e.msg} at line {e.lineno})") from None
        return self._cache[src]

    def get(self, src: str, path: str):
        obj = self.load(src)
        walked = []
        for key in path.strip().split("/"):
            walked.append(key)
            if isinstance(obj, list):
                try:
                    obj = obj[int(key)]
                    continue
                except (ValueError, IndexError):
                    raise KeyError(f"{src}:{'/'.join(walked)}: no such item in a list of {len(obj)}") from None
            if not isinstance(obj, dict) or key not in obj:
                have = ", ".join(sorted(obj)[:12]) if isinstance(obj, dict) else type(obj).__name__
                raise KeyError(f"{src}:{'/'.join(walked)}: not in the source (it has: {have})")
            obj = obj[key]
        if obj is None:
            raise KeyError(f"{src}:{path}: null in the source")
        return obj


# ---- generated tables -------------------------------------------------------------------------
def _num(v, fmt: str) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


def table_reference_systems(src: Sources) -> str:
    """Every system of the reference's baseline matrix with an emulated accelerator: median steady
    epoch, min-max, spread, runs, AU, and its epoch over LSM-GNN's."""
    t = src.load("timings")
    systems = t["systems"]
    lsm = next((v for k, v in systems.items() if k.startswith("lsm ") and not k.endswith("[real]")), None)
    rows = ["| system (emulated accelerator) | steady epoch, median [min, max] (s) | spread | runs | AU | epoch / LSM-GNN's |",
            "|---|---|---|---|---|---|"]
    for name, s in sorted(systems.items(), key=lambda kv: kv[1]["epoch_steady_s"]):
        if name.endswith("[real]"):
            continue
        ratio = s["epoch_steady_s"] / lsm["epoch_steady_s"] if lsm else None
        rows.append(f"| {name} | {_num(s['epoch_steady_s'], '.1f')} [{_num(s['steady_min'], '.1f')}, "
                    f"{_num(s['steady_max'], '.1f')}] | {_num(100 * s['steady_spread'], '.1f')} % | {s['runs']} | "
                    f"{_num(100 * s['au'] if s.get('au') is not None else None, '.1f')} % | {_num(ratio, '.2f')} |")
    return "\n".join(rows) + "\n"


TABLES = {"reference-systems": table_reference_systems}


# ---- fill and check ----------------------------------------------------------------------------
def documents(root: str | Path) -> list[Path]:
    root = Path(root)
    out: list[Path] = []
    for pattern in DOCUMENTS:
        out += sorted(root.glob(pattern))
    return [p for p in out if p.is_file()]


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def render(text: str, src: Sources, name: str = "") -> tuple[str, list[Problem]]:
    """The text with every marker filled from its source, and the problems: a value that differs,
    a figure the source lacks (left as it was)."""
    problems: list[Problem] = []

    def inline(m: re.Match) -> str:
        marker = f"{m['src']}:{m['path'].strip()}|{m['fmt']}"
        try:
            want = format_value(src.get(m["src"], m["path"]), m["fmt"])
        except (KeyError, ValueError) as e:
            problems.append(Problem(name, _line_of(text, m.start()), "missing", marker, expected=str(e).strip("'\"")))
            return m.group(0)
        if m["value"] != want:
            problems.append(Problem(name, _line_of(text, m.start()), "differs", marker, m["value"], want))
        return f"<!-- q {m['src']}:{m['path']}|{m['fmt']} -->{want}<!-- /q -->"

    def table(m: re.Match) -> str:
        maker = TABLES.get(m["name"])
        if maker is None:
            problems.append(Problem(name, _line_of(text, m.start()), "missing", f"table {m['name']}",
                                    expected=f"no such table (tables: {', '.join(TABLES)})"))
            return m.group(0)
        try:
            want = "".join(m["indent"] + line for line in maker(src).splitlines(keepends=True))
        except (KeyError, TypeError) as e:
            problems.append(Problem(name, _line_of(text, m.start()), "missing", f"table {m['name']}", expected=str(e)))
            return m.group(0)
        if m["body"] != want:
            problems.append(Problem(name, _line_of(text, m.start()), "differs", f"table {m['name']}",
                                    m["body"][:200], want[:200]))
        return m["open"] + want + m["close"]

    out = TABLE_RE.sub(table, text)
    out = INLINE_RE.sub(inline, out)
    return out, problems


def check_dated(text: str, name: str = "") -> list[Problem]:
    """Every `**Dated**:` line names, in this order, the commit that was measured (7-40 hex digits
    in backticks), the date (YYYY-MM-DD) and the command (in backticks)."""
    problems = []
    for m in DATED_RE.finditer(text):
        if not DATED_PARTS_RE.match(m["rest"]):
            problems.append(Problem(name, _line_of(text, m.start()), "dated", m.group(0)[:80],
                                    expected="a dated measurement reads **Dated**: commit `HASH`, YYYY-MM-DD, `COMMAND`"))
    return problems


def dated_commits(text: str) -> list[str]:
    """The commits the dated lines of a text name."""
    return [p["commit"] for m in DATED_RE.finditer(text) if (p := DATED_PARTS_RE.match(m["rest"]))]


def quote(root: str | Path, write: bool, reference: str | Path | None = None) -> tuple[list[Path], list[Problem]]:
    """Fill (write=True) or check every document: (files changed or that would change, problems).
    With write, a value that differs is rewritten (not a problem then); a missing figure stays one."""
    from lsm_gnn.utils.atomic import write_text

    root = Path(root)
    src = Sources(root, reference)
    changed, problems = [], []
    for p in documents(root):
        text = p.read_text()
        rel = str(p.relative_to(root))
        out, probs = render(text, src, rel)
        probs += check_dated(text, rel)
        if write:
            probs = [q for q in probs if q.what != "differs"]
            if out != text:
                write_text(p, out)
        if out != text:
            changed.append(p)
        problems += probs
    return changed, problems
