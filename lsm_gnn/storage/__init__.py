"""Feature stores: read rows of node features from storage with exact I/O accounting.

Readers: direct (O_DIRECT, parallel block reads), buffered (page cache), mmap (numpy memmap
gather), memory (all in RAM), gpu (pinned staging + copy, or kvikio). Open one with
`open_feature_store`; see docs/storage.md.
"""

from lsm_gnn.storage.base import FeatureStore, IOCounters  # noqa: F401
from lsm_gnn.storage.open import READERS, open_feature_store, open_from_config, owner_row_map  # noqa: F401
