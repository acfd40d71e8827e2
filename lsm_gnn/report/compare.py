"""Compare two workflow reports: figures.json exactly, timings.json side by side, machine.json.

A report is a folder `reports/<dataset>/` written by the workflow (or a figures.json path inside
one). figures.json holds `settings` (the config keys that decide its figures) and `figures` and
`verdicts` (counts and ratios of counts: no machine changes them). Two reports are comparable when
their settings are equal; they agree when every figure and verdict is equal. Differences are
listed by their dotted path (`figures.policies.hybrid m0.1 W8.storage_rows`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from lsm_gnn.utils.errors import DataError

FIGURES, TIMINGS, MACHINE = "figures.json", "timings.json", "machine.json"
FIGURES_SCHEMA = "lsm-gnn-report-figures"
# the parts of figures.json that must agree (settings decide whether the two are comparable at all)
COMPARED = ("figures", "verdicts")


def _read(path: Path, what: str, required: bool) -> dict | None:
    if not path.is_file():
        if required:
            raise DataError(path, f"no {what}", expected=f"a {path.name} written by the workflow (rule figures / verdicts)",
                            found="no such file")
        return None
    try:
        obj = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise DataError(path, f"not JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(obj, dict):
        raise DataError(path, f"{what}: not a JSON object", expected="{...}", found=type(obj).__name__)
    return obj


def load_report(path: str | os.PathLike) -> dict:
    """{"root", "figures", "timings" (or None), "machine" (or None)} of a report folder."""
    p = Path(path)
    root = p.parent if p.is_file() else p
    figs = _read(root / FIGURES, "hardware-independent figures", True)
    if figs.get("schema") != FIGURES_SCHEMA:
        raise DataError(root / FIGURES, "field schema", expected=FIGURES_SCHEMA, found=figs.get("schema"))
    return {"root": str(root), "figures": figs, "timings": _read(root / TIMINGS, "timings", False),
            "machine": _read(root / MACHINE, "machine description", False)}


def flatten(obj, prefix: str = "") -> dict:
    """{dotted path: leaf value}; lists are leaves (compared whole)."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: obj}


def _diff(a: dict, b: dict) -> dict:
    fa, fb = flatten(a), flatten(b)
    differ = [(k, fa[k], fb[k]) for k in sorted(fa.keys() & fb.keys()) if fa[k] != fb[k]]
    return {"equal": sum(1 for k in fa.keys() & fb.keys() if fa[k] == fb[k]), "differ": differ,
            "only_a": sorted(fa.keys() - fb.keys()), "only_b": sorted(fb.keys() - fa.keys())}


def _timing_rows(a: dict | None, b: dict | None) -> list[tuple]:
    fa = {k: v for k, v in flatten(a or {}).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    fb = {k: v for k, v in flatten(b or {}).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    rows = []
    for k in sorted(fa.keys() | fb.keys()):
        if k.startswith(("version", "spread_limit")):
            continue
        va, vb = fa.get(k), fb.get(k)
        rows.append((k, va, vb, (vb / va) if va and vb is not None else None))
    return rows


def compare(a: dict, b: dict) -> dict:
    """The comparison of two loaded reports (`load_report`). `agree`: comparable and every figure
    and verdict equal."""
    settings = _diff(a["figures"].get("settings") or {}, b["figures"].get("settings") or {})
    comparable = not (settings["differ"] or settings["only_a"] or settings["only_b"])
    figs = _diff({k: a["figures"].get(k) for k in COMPARED}, {k: b["figures"].get(k) for k in COMPARED})
    agree = comparable and not (figs["differ"] or figs["only_a"] or figs["only_b"])
    return {"a": a["root"], "b": b["root"], "comparable": comparable, "agree": agree,
            "settings": settings, "figures": figs,
            "timings": _timing_rows(a.get("timings"), b.get("timings")),
            "machines": {"a": a.get("machine"), "b": b.get("machine")}}


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (dict, list)):
        return json.dumps(v)[:120]
    return str(v).replace("|", "/")[:160]


def render(res: dict) -> str:
    """The comparison for people (markdown)."""
    a, b = res["a"], res["b"]
    f = res["figures"]
    head = ("**The hardware-independent figures agree exactly**" if res["agree"] else
            "**Settings differ: the figures are not comparable**" if not res["comparable"] else
            "**The hardware-independent figures DIFFER**")
    out = [f"# {b} beside {a}", "", f"{head}: {f['equal']:,} equal, {len(f['differ']):,} different, "
           f"{len(f['only_a']):,} only in A, {len(f['only_b']):,} only in B (A = {a}, B = {b}).", ""]
    s = res["settings"]
    if not res["comparable"]:
        out += ["Settings (figures.json `settings`) that differ:", "", "| setting | A | B |", "|---|---|---|"]
        out += [f"| {k} | {_cell(x)} | {_cell(y)} |" for k, x, y in s["differ"]]
        out += [f"| {k} | (set) | (absent) |" for k in s["only_a"]] + [f"| {k} | (absent) | (set) |" for k in s["only_b"]]
        out.append("")
    if f["differ"] or f["only_a"] or f["only_b"]:
        out += ["Figures that differ:", "", "| figure | A | B |", "|---|---|---|"]
        out += [f"| {k} | {_cell(x)} | {_cell(y)} |" for k, x, y in f["differ"]]
        out += [f"| {k} | {_cell('(present)')} | (absent) |" for k in f["only_a"]]
        out += [f"| {k} | (absent) | (present) |" for k in f["only_b"]]
        out.append("")
    ma, mb = res["machines"]["a"] or {}, res["machines"]["b"] or {}
    ha, hb = ma.get("hardware") or {}, mb.get("hardware") or {}
    out += ["Machines (machine.json):", "", "| | A | B |", "|---|---|---|"]
    for k in sorted(set(ha) | set(hb)):
        out.append(f"| {k} | {_cell(ha.get(k))} | {_cell(hb.get(k))} |")
    for k in ("git_commit", "written"):
        out.append(f"| {k} | {_cell(ma.get(k))} | {_cell(mb.get(k))} |")
    out += ["", "Timings (timings.json; they depend on the machine, shown side by side):", "",
            "| figure | A | B | B / A |", "|---|---|---|---|"]
    out += [f"| {k} | {_cell(x)} | {_cell(y)} | {_cell(r)} |" for k, x, y, r in res["timings"]]
    return "\n".join(out) + "\n"
