"""`lsm-gnn check faults`: inject each fault into a temporary copy of a tiny synthetic graph and
count how every run ended.

Each case (the `CASES` table, docs/faults.md lists them all) does one thing a user or the machine
can do wrong -- a flipped byte in features.bin, a full disk while generating, two runs on one
record, a killed launcher -- runs the `lsm-gnn` command it hurts, and is classified:

  clear error      the command stopped with an error naming what was wrong (an LsmGnnError or a
                   usage error), nothing half-written left behind;
  failed record    the same, and the run's record says `status: failed`;
  recovered        the command did what was asked and said how it dealt with the fault (a clamp it
                   states, leftovers it named and removed, ranks that ended with their launcher);
  silently wrong   the command succeeded as if nothing had happened (a trained model from a flipped
                   byte, two runs on one record both "complete");
  hang             the case outlived its time limit (killed, with everything it started);
  traceback        any other exception: a bug's traceback where a named error was due.

Cases run one after another, each in a process forked from this one (the slow imports are paid
once; the parent never runs the libraries' thread pools, so a fork is safe) and in its own process
group, so that a hang is killed with everything it spawned. `--cheap` keeps the cases that train
nothing and spawn no ranks (what CI runs: `pytest -m faults`). Real faults where the kernel allows
them: a tmpfs of a few KB in a private mount namespace for a full disk, a read-only tmpfs, SIGKILL
and SIGSTOP of real processes, a loopback HTTP server (lsm_gnn.check.sandbox).

The package: `base` (what a case sees, the damage helpers, the `CASES` table), one module per fault
family (`dataset`, `configuration`, `outputs`, `importing`, `downloads`, `ranks`, `workflow`; imported here in
this order, which is the order of `CASES` and of docs/faults.md) and `runner`.
"""

from __future__ import annotations

# the families register their cases on import, in the order of docs/faults.md
from lsm_gnn.check.faults import dataset, configuration, outputs, importing, downloads, ranks, workflow  # noqa: F401, I001
from lsm_gnn.check.faults.base import (BASE_DIM, BASE_NODES, CASES, ETYPE, GOOD, OUTCOMES, Case, Ctx,  # noqa: F401
                                       Outcome, Ran, case, judge_error, judge_run)
from lsm_gnn.check.faults.runner import make_base, run_case, run_suite, select  # noqa: F401
