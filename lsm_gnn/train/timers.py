"""Stage timers: seconds per stage accumulated per iteration, in the run-record vocabulary.

Stages are `lsm_gnn.records.STAGES` (sample, exchange_ids, fetch_cache, fetch_victim,
fetch_storage, exchange_rows, train, sync, other). `StageTimes` is a plain dict-like accumulator;
`StageTimer.stage(name)` times a `with` block into it. Each iteration's times are kept so a run can
report means over any window (the timed window after warm-up) and epoch totals.
"""

from __future__ import annotations

import contextlib
import time

from lsm_gnn.records import ITERATION_KEYS, mean_times


class StageTimes(dict):
    def __init__(self, *args, **kw):
        super().__init__(dict.fromkeys(ITERATION_KEYS, 0.0))
        self.update(*args, **kw)

    def add(self, other: dict) -> "StageTimes":
        for k, v in other.items():
            self[k] = self.get(k, 0.0) + float(v)
        return self

    def scaled(self, f: float) -> "StageTimes":
        return StageTimes({k: v * f for k, v in self.items()})


class StageTimer:
    """Collects one `StageTimes` per iteration."""

    def __init__(self):
        self.iterations: list[StageTimes] = []
        self.current = StageTimes()

    @contextlib.contextmanager
    def stage(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.current[name] = self.current.get(name, 0.0) + time.perf_counter() - t0

    def add(self, times: dict) -> None:
        self.current.add(times)

    def end_iteration(self) -> StageTimes:
        done, self.current = self.current, StageTimes()
        self.iterations.append(done)
        return done

    @staticmethod
    def total(items) -> StageTimes:
        out = StageTimes()
        for it in items:
            out.add(it)
        return out

    @staticmethod
    def mean(items) -> StageTimes:
        return StageTimes(mean_times(items))
