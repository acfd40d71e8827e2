"""`python -m lsm_gnn.cli ...`: the `lsm-gnn` command where its console script is not on PATH."""

from lsm_gnn.cli import main

main()
