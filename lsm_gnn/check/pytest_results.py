"""A pytest plugin of `lsm-gnn check gpu`: one JSON line per test event, written as it happens.

`pytest -p lsm_gnn.check.pytest_results --results-jsonl FILE` appends, and flushes, one line when
a test starts (`{"event": "start", "nodeid": ...}`), one per report of its setup, call and
teardown (`"event": "report"`, with `when`, `outcome`, `duration`, the skip reason or the first
lines of the failure) and one per module that failed or was skipped while collecting
(`"event": "collect"`). A run killed at its time limit thus keeps every test that had finished,
and the last `start` without a teardown names the one that was running (lsm_gnn.check.gpu reads it:
`results_counts`). Imports only the standard library.
"""

from __future__ import annotations

import json

OPTION = "--results-jsonl"
_KEY = "lsm_gnn_results_file"


def pytest_addoption(parser):
    parser.addoption(OPTION, default=None, metavar="FILE",
                     help="append one JSON line per test event to FILE as it happens (lsm-gnn check gpu)")


def pytest_configure(config):
    path = config.getoption(OPTION)
    if path:
        setattr(config, _KEY, open(path, "a", buffering=1))  # line-buffered: each line reaches the file at once


def pytest_unconfigure(config):
    f = getattr(config, _KEY, None)
    if f is not None:
        f.close()


def _write(config, obj: dict) -> None:
    f = getattr(config, _KEY, None)
    if f is not None:
        f.write(json.dumps(obj) + "\n")
        f.flush()


def _reason(report) -> str:
    lr = report.longrepr
    if lr is None:
        return ""
    if isinstance(lr, tuple) and len(lr) == 3:  # a skip: (file, line, reason)
        return str(lr[2])
    text = str(lr)
    return text if len(text) <= 3000 else text[:1000] + "\n...\n" + text[-2000:]


_CONFIG = []  # the session's config, for the hooks that are not handed it


def pytest_sessionstart(session):
    _CONFIG[:] = [session.config]


def pytest_runtest_logstart(nodeid, location):
    if _CONFIG:
        _write(_CONFIG[0], {"event": "start", "nodeid": nodeid})


def pytest_runtest_logreport(report):
    if _CONFIG:
        _write(_CONFIG[0], {"event": "report", "nodeid": report.nodeid, "when": report.when,
                            "outcome": report.outcome, "duration": round(report.duration, 3),
                            "xfail": bool(getattr(report, "wasxfail", "")), "reason": _reason(report)})


def pytest_collectreport(report):
    if _CONFIG and not report.passed:
        _write(_CONFIG[0], {"event": "collect", "nodeid": report.nodeid, "outcome": report.outcome,
                            "reason": _reason(report)})
