"""Training on one device: the loader (sampler -> lookahead -> feature source), the loop that
writes run records (`loop.run_training`), feature-source selection, stage timers, evaluation and
`lsm-gnn bench train`. See docs/training.md."""
