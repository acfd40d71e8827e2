"""Training on one device: the loader (sampler -> lookahead -> feature source) and its stage
timers, the loop that writes run records (`loop.run_training`), feature-source selection,
evaluation and `lsm-gnn bench train`. See docs/training.md."""
