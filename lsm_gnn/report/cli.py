"""`lsm-gnn report`: work with the reports the reproduction workflow writes."""

from __future__ import annotations

import json
import sys

import click

from lsm_gnn.utils.outpaths import output_option


@click.group()
def report():
    """Reports of the reproduction workflow (reports/<dataset>/)."""


@report.command("compare")
@click.argument("reference", type=click.Path(exists=True))
@click.argument("other", type=click.Path(exists=True))
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of markdown.")
@click.option("--out", "out", type=click.Path(dir_okay=False), default=None, callback=output_option(),
              help="Also write the markdown here.")
def compare_cmd(reference, other, as_json, out):
    """Put the report OTHER beside REFERENCE (report folders, e.g. reports/reference and
    reports/synthetic-small): the hardware-independent figures (figures.json) must agree exactly for
    the same seed and settings, and every difference is listed; timings (timings.json) side by side
    with both machines (machine.json). Exit status 0 when they agree, 1 when figures differ, 2 when
    the settings differ (not comparable)."""
    from lsm_gnn.report.compare import compare, load_report, render

    res = compare(load_report(reference), load_report(other))
    text = render(res)
    if out:
        from lsm_gnn.utils.atomic import write_text

        write_text(out, text)
    click.echo(json.dumps(res, default=str) if as_json else text, nl=not as_json)
    sys.exit(0 if res["agree"] else (2 if not res["comparable"] else 1))


@report.command("quote")
@click.option("--check", is_flag=True, help="Change nothing: exit 1 when a quoted number differs from its source.")
@click.option("--root", type=click.Path(exists=True, file_okay=False), default=".", show_default=True,
              help="The repository whose README.md and docs/*.md are filled.")
@click.option("--reference", type=click.Path(exists=True, file_okay=False), default=None,
              help="The reference report the short source names read (default: ROOT/reports/reference).")
def quote_cmd(check, root, reference):
    """Fill every quoted number of README.md and docs/*.md from its source: the markers
    `<!-- q SOURCE:PATH|FMT -->VALUE<!-- /q -->` and `<!-- table NAME -->...<!-- /table -->`
    (lsm_gnn/report/quote.py; docs/workflow.md, "Where a quoted number comes from"). Exit status 0
    when every marker matches (or was filled), 1 when one differs (--check) or names a figure its
    source lacks, a dated line lacks its commit, date or command, or a ratio or percentage in prose
    is neither quoted, dated nor a setting (`check_figures`)."""
    from lsm_gnn.report.quote import quote

    changed, problems = quote(root, write=not check, reference=reference)
    for p in problems:
        click.echo(str(p), err=True)
    verb = "would change" if check else "filled"
    click.echo(f"{len(changed)} file(s) {verb}: {', '.join(str(c) for c in changed) or 'none'}; "
               f"{len(problems)} problem(s)")
    sys.exit(1 if problems else 0)
