"""Workflow step: the front page of Snakemake's report (`snakemake --report`, make report): the
workflow's description (workflow/report/workflow.rst) followed by the verdicts section of report.md,
turned from markdown into reStructuredText (headings, paragraphs, lists, one pipe table), so that
the HTML report opens with the verdicts as report.md does."""

import re
from pathlib import Path

from lsm_gnn.utils.atomic import write_text
from wfcommon import log_to

sm = snakemake  # noqa: F821  (injected by Snakemake)
log_to(sm)


def inline(text: str) -> str:
    # markdown `code` is rst ``code``; **bold** is the same in both
    return re.sub(r"(?<!`)`([^`]+)`(?!`)", r"``\1``", text)


def cells(line: str) -> list[str]:
    return [inline(c.strip()) or "-" for c in line.strip().strip("|").split("|")]


def to_rst(md: str) -> str:
    out, lines, i = [], md.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("!["):  # the claims figure: its own item of the report (rule verdicts)
            i += 1
            continue
        if line.startswith("#"):
            title = inline(line.lstrip("#").strip())
            out += [title, "-" * len(title), ""]
        elif line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                if not re.fullmatch(r"\|[\s:|-]+\|?", lines[i].strip()):
                    rows.append(cells(lines[i]))
                i += 1
            out += [".. list-table::", "   :header-rows: 1", ""]
            for row in rows:
                out += [f"   * - {row[0]}"] + [f"     - {c}" for c in row[1:]]
            out.append("")
            continue
        else:
            out.append(inline(line))
        i += 1
    return "\n".join(out) + "\n"


intro = (Path(sm.scriptdir).parent / "report" / "workflow.rst").read_text()
write_text(sm.output[0], intro + "\n" + to_rst(Path(sm.input.verdicts).read_text()))
