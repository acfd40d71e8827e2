"""asv timing settings shared by every `time_` benchmark (one place; `make bench-compare` and
docs/benchmarks.md explain how they were chosen).

A sample is one call (`number = 1`; every timed call here takes 5 ms or more) after `warmup_time`
seconds of untimed calls; each process takes `repeat` samples and asv runs `rounds` processes per
benchmark, interleaved between the two commits with `--interleave-rounds`, so a burst of load
from another process lands on both commits instead of on one.
"""


class Timed:
    number = 1
    repeat = (4, 8, 1.5)  # (min, max samples, seconds per process): 4 to 8 samples a round
    # 4 rounds: with 2, the VM's drift over minutes flagged an A/A pair in 2 of 3 whole-suite runs and
    # hid a planted 1.22x replay slowdown in 1 of 3; with 4, one run flagged nothing A/A and all 7
    # planted timings, and nothing else (docs/benchmarks.md, 2026-12-02)
    rounds = 4
    warmup_time = 0.2
    timeout = 120
