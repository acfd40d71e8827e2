"""A calibrated projection of epoch time per system from a run record's counts and a hardware
profile: `lsm-gnn project RECORDS... --hardware PROFILE` (docs/projection.md)."""

from lsm_gnn.project.counts import Counts, counts_from_record, load_counts
from lsm_gnn.project.model import Projection, project, project_all, ratios, validate
from lsm_gnn.project.profiles import Profile, load_profile, parse_profile

__all__ = ["Counts", "Profile", "Projection", "counts_from_record", "load_counts", "load_profile",
           "parse_profile", "project", "project_all", "ratios", "validate"]
