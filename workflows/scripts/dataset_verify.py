"""Workflow step: full verification of the generated dataset; fails the rule on any problem."""

import sys

from lsm_gnn.datasets.verify import verify
from lsm_gnn.utils.atomic import write_text

sm = snakemake  # noqa: F821  (injected by Snakemake)
problems = verify(sm.params.data, quick=False)
if problems:
    for p in problems:
        print(f"{sm.params.data}/{p}", file=sys.stderr)
    sys.exit(f"{sm.params.data}: {len(problems)} problem(s); see above")
write_text(sm.output[0], f"{sm.params.data}: OK (full check: sizes, sha256 of every file, dtypes, "
                         "id ranges, CSC/CSR monotonicity and agreement, labels, splits, static scores)\n")
