"""The accepted values of the config's enumerated keys whose implementations live above the config.

One list each, at the bottom of the import graph (it imports nothing), so that the config model
(lsm_gnn.config builds its `Literal` types from them), the factories that dispatch on them and the
CLI's choices read the same list without the config importing an implementation:

  READERS  storage.reader: the feature stores lsm_gnn.storage.open_feature_store opens
  ENGINES  cache.engine: the cache engines lsm_gnn.cache.engines.make_engine builds
  HARDWARE_PROFILES  baselines.network_profile: the packaged projection profiles of
           lsm_gnn.project.profiles (a floor above the config)
  ACCELERATOR_PROFILES  train.accelerator_profile: the packaged emulated accelerators of
           lsm_gnn.accelerator (which imports the config to measure a step)
"""

from __future__ import annotations

READERS = ("direct", "buffered", "mmap", "memory", "gpu")
ENGINES = ("cpu", "gpu", "reference")
ROW_ENGINES = tuple(e for e in ENGINES if e != "reference")
"""The engines a data plane serves rows through (the reference engine only replays traces)."""

HARDWARE_PROFILES = ("this-machine", "paper", "h200x8")
"""The hardware profiles lsm_gnn/project/profiles/ ships (lsm_gnn.project.profiles.PACKAGED)."""

ACCELERATOR_PROFILES = ("a100", "h200")
"""The accelerator profiles lsm_gnn/accelerator/profiles/ ships (lsm_gnn.accelerator.PACKAGED)."""
