"""Reports of the reproduction workflow: `lsm-gnn report compare A B` puts a report beside another
(a reference report, reports/reference/): the hardware-independent figures (figures.json) must
agree exactly for the same seed and settings, the timings (timings.json) are shown side by side
with both machines' descriptions (machine.json). docs/workflow.md, "Comparing with the reference"."""
