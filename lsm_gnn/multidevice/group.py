"""The old path of lsm_gnn.ranks.group (examples/dgl_sage.py imported `init_process_group` from
here), kept for users' scripts; the process group lives in lsm_gnn.ranks.group."""

from lsm_gnn.ranks.group import exchange_group, init_process_group, pick_free_port, resolve_backend  # noqa: F401
