"""Every benchmark, one module per subject; `lsm-gnn bench <verb>` (lsm_gnn/cli/bench.py) loads
its command from here. Each prints ratios against a baseline measured in the same run, and with
--json one object with the same figures under stable names (docs/benchmarks.md).

  storage      the readers' row throughput next to fio's device limit over the same file
  device       the emulated storage device against its own model, queue depth 1 to 1024
  cache        the CPU cache engine's replay speed per policy (and the GPU steps of check gpu)
  exchange     the exchange link's bandwidth between ranks, per row transport
  multidevice  shared cache vs isolated caches vs one device, on one trace
  train        LSM-GNN's steady epoch against the in-memory ideal
  loader       the DGL and PyG loaders against lsm-gnn's FeatureLoader
  compare      every system of the harness (baselines/) at equal memory, replicated and interleaved
  validate     the emulated testbed's checks over compare's outputs
  replicate    (no verb) the rule of replicated runs every benchmark and report uses: the 5 %
               limit, median / min / max / spread, rotated rounds, a run's summary

The benchmarks stand above the engines they measure (tests/test_import_graph.py): they import
them, and no engine imports a benchmark. `compare` is the one library module that imports the
comparators (baselines.harness), through an import statement the import test sees.
"""
