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
lines to naming all three (docs/workflow.md, "Where a quoted number comes from").

Every other result figure, a ratio (``2.31x``) or a percentage (``10 %``), is one of those two or
goes: `check_figures` finds the ones that are neither, and reads a setting, a target or the paper's
own figure by a short fixed grammar (``SETTING_BEFORE_RE``, ``SETTING_AFTER_RE``, ``BUDGET_AFTER_RE``,
``PAPER_RE``)."""

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
    what: str  # "differs" | "missing" | "dated" | "figure"
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


def _anchor(heading: str) -> str:
    """A markdown heading's anchor as GitHub writes it: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lstrip("#").strip().lower()).replace(" ", "-")


def table_findings(src: Sources) -> str:
    """The README's "What we found": each claim of the paper, the paper's figure, the verdict on the
    reference run and each kind of evidence's figure with its range (timings.json `findings`, written
    by the report's verdicts rule), and the report section that holds the data."""
    found = src.load("timings").get("findings")
    if not found:
        raise KeyError("timings:findings: not in the source (a reference built before the findings were written)")
    report = src.reference / "report.md"
    headings = [h for h in report.read_text().splitlines() if h.startswith("## ")] if report.is_file() else []
    rows = ["| claim | the paper | verdict on the reference run | evidence: figure [range] | data |",
            "|---|---|---|---|---|"]
    for c in found:
        label = c["label"]
        ev = "; ".join(f"{e['kind']}: {e['text']}" + ("" if e["counted"] else " (not counted)") for e in c["evidence"])
        section = c.get("section") or ""
        head = next((h for h in headings if h[3:].startswith(section)), None) if section else None
        link = f"[{section}](reports/reference/report.md#{_anchor(head)})" if head else (section or "-")
        kind = f" ({c['kind']})" if c.get("kind") else ""
        rows.append(f"| {label} {c['statement']} | {c['paper']} | **{c['verdict']}**{kind} | {ev or '-'} | {link} |")
    return "\n".join(rows) + "\n"


TABLES = {"reference-systems": table_reference_systems, "findings": table_findings}


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


# ---- result figures ----------------------------------------------------------------------------
# A result figure: a number (signed or not) followed by `x` (a ratio: 2.31x) or by `%` (10 %, 10%).
# A spaced `x` is a ratio only where no operand (a word, a number, "(" or "*") follows it:
# `2 x 2 GPUs`, `1024 x fp32`, `768 x **fp16**` and `0.9 x the time` are products.
FIGURE_RE = re.compile(r"(?<![\w.])[+\-−±]?\d+(?:\.\d+)?(?:x(?!\w)|\s?%|\sx(?!\s*[\w(*]))")
# Not a result, by this grammar and nothing else (docs/workflow.md, "Where a quoted number comes
# from"): a setting, threshold or target, or the paper's own figure, that is a figure
#  - right after a comparison, or after a target word and an optional "of", "is", ":" or "=" (and
#    then "within" or a comparison): "<= 5 %", "at least 3x", "tolerance 10 %", "target: within 3 %";
#    "within" alone is not enough ("matched within 6.3 %" is a result);
#  - right before a target word: "the 50x target", "the 3.75x claim" (a claim is the paper's);
#  - a percentage of the memory budget: "10 % of the features", "10 % feature memory", "90 % cache
#    lines";
#  - after "the paper" in the same clause (since the last sentence end, ";", table cell or blank line):
#    "the paper's 3.75x".
_COMPARISON = r"<=|>=|≤|≥|<|>|\bat most|\bat least|\bmore than|\bless than|\babove|\bbelow"
_TARGET_WORD = r"target|targets|limit|tolerance|threshold"
SETTING_BEFORE_RE = re.compile(rf"(?:(?:{_COMPARISON})|\b(?:{_TARGET_WORD})\s*(?:of\b|is\b|:|=)?"
                               rf"\s*(?:\bwithin\b|{_COMPARISON})?)\s*$", re.I)
SETTING_AFTER_RE = re.compile(rf"^\s*(?:{_TARGET_WORD}|claim)\b", re.I)
BUDGET_AFTER_RE = re.compile(r"^%\s*(?:of\s+(?:the\s+|its\s+|it\s+)?)?(?:feature\s+)?"
                             r"(?:memory|features|feature bytes|cache lines|cache|host tier)\b")
PAPER_RE = re.compile(r"\bthe paper\b", re.I)
# where a clause starts: a sentence's end, a semicolon, a table cell, a blank line
CLAUSE_START_RE = re.compile(r"[.!?](?=\s)|;|\||\n\s*\n")
FENCE_RE = re.compile(r"^[ ]*(```|~~~).*?^[ ]*\1[^\n]*$", re.S | re.M)
CODE_RE = re.compile(r"``.+?``|`[^`\n]+`")
HEADING_RE = re.compile(r"^#{1,6} ")


def _blank(m: re.Match) -> str:
    return re.sub(r"[^\n]", " ", m.group(0))


def prose(text: str) -> str:
    """The text with all that is not prose blanked (newlines kept, so positions hold): fenced code,
    inline code, quote markers and generated tables, HTML comments, and every section (up to the
    next heading) below a `**Dated**:` line."""
    text = FENCE_RE.sub(_blank, text)
    text = TABLE_RE.sub(_blank, text)
    text = INLINE_RE.sub(_blank, text)
    text = re.sub(r"<!--.*?-->", _blank, text, flags=re.S)
    text = CODE_RE.sub(_blank, text)
    out, dated = [], False
    for line in text.split("\n"):
        if HEADING_RE.match(line):
            dated = False
        if DATED_RE.match(line):
            dated = True
        out.append(" " * len(line) if dated else line)
    return "\n".join(out)


def is_setting(text: str, m: re.Match) -> bool:
    """Whether the figure `m` of `text` (prose) reads as a setting, target or the paper's figure."""
    before, figure = text[:m.start()], m.group(0)
    if SETTING_BEFORE_RE.search(before[-40:]):
        return True
    after = text[m.end():m.end() + 40]
    if SETTING_AFTER_RE.match(after) or (figure.endswith("%") and BUDGET_AFTER_RE.match("%" + after)):
        return True
    starts = [c.end() for c in CLAUSE_START_RE.finditer(before)]
    return bool(PAPER_RE.search(before[starts[-1] if starts else 0:]))


def check_figures(text: str, name: str = "") -> list[Problem]:
    """Every ratio or percentage in prose is quoted (a marker or generated table), dated (in a
    section below a `**Dated**:` line) or a setting by `is_setting`'s grammar; each one that is none
    of these is a problem."""
    body = prose(text)
    problems = []
    for m in FIGURE_RE.finditer(body):
        if is_setting(body, m):
            continue
        line = _line_of(body, m.start())
        problems.append(Problem(name, line, "figure", m.group(0),
                                expected="a result figure neither quoted (<!-- q -->) nor dated (a **Dated** line "
                                         "above it in its section): quote it, date it, or say it once and link there"))
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
        probs += check_dated(text, rel) + check_figures(text, rel)
        if write:
            probs = [q for q in probs if q.what != "differs"]
            if out != text:
                write_text(p, out)
        if out != text:
            changed.append(p)
        problems += probs
    return changed, problems
