"""The buffered reader: the direct reader's block plan read with plain `pread` through the page cache.

Same reads, same accounting (`bytes_read` counts the blocks asked of the kernel); the difference
from the direct reader is only that the page cache may serve them, and fills up as a side effect.
"""

from __future__ import annotations

from lsm_gnn.storage.direct import BlockStore


class BufferedStore(BlockStore):
    """Block reads through the page cache (no O_DIRECT)."""

    reader_name = "buffered"
    o_direct = False
