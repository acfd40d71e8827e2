"""Running the sampler ahead of training: a background thread and the lookahead window.

`Background(iterable, depth)` runs any iterator in a daemon thread, `depth` items ahead (the
numba sampling kernels release the GIL, so on two cores sampling overlaps the train step).
Exceptions travel to the consumer; `close()` stops the thread.

`Lookahead(iterable, W)` yields `(item, window)` where `window` is the list of the input ids of
the next W items (fewer at the end of the stream): at iteration t the window holds batches
t+1 .. t+W, which is what `FeatureSource.advance(window)` expects (reuse tags, victim-buffer
queues). The window crosses epoch boundaries when the stream does.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
from typing import Callable, Iterable, Iterator

_DONE = object()


class _Raised:
    def __init__(self, exc: BaseException):
        self.exc = exc


class Background:
    """Iterate `iterable` in a daemon thread, at most `depth` items ahead of the consumer."""

    def __init__(self, iterable: Iterable, depth: int = 2, name: str = "lsm-gnn-sampler"):
        self._q: queue.Queue = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self.busy_s = 0.0          # time the thread spent producing items
        self.wait_s = 0.0          # time the consumer spent waiting for them
        self._it = iter(iterable)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self):
        try:
            while not self._stop.is_set():
                t0 = time.perf_counter()
                try:
                    item = next(self._it)
                except StopIteration:
                    break
                self.busy_s += time.perf_counter() - t0
                if not self._put(item):
                    return
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            self._put(_Raised(e))
            return
        self._put(_DONE)

    def __iter__(self) -> Iterator:
        return self

    def __next__(self):
        if self._stop.is_set():
            raise StopIteration
        t0 = time.perf_counter()
        while True:
            try:
                item = self._q.get(timeout=0.1)
                break
            except queue.Empty:
                if not self._thread.is_alive() and self._q.empty():
                    raise RuntimeError("background iterator thread died without a result") from None
        self.wait_s += time.perf_counter() - t0
        if item is _DONE:
            self._stop.set()
            raise StopIteration
        if isinstance(item, _Raised):
            self._stop.set()
            raise item.exc
        return item

    def close(self):
        self._stop.set()
        while True:
            try:
                self._q.get_nowait()
            except queue.Empty:
                break
        self._thread.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Lookahead:
    """Yield `(item, window)`: window = ids of the next W items (`ids_of(item)`, default input_nodes)."""

    def __init__(self, iterable: Iterable, window: int, ids_of: Callable | None = None):
        if window < 0:
            raise ValueError(f"window must be >= 0, found {window}")
        self.W = int(window)
        self._it = iter(iterable)
        self._buf: collections.deque = collections.deque()
        self._ids_of = ids_of or (lambda b: b.input_nodes)
        self._exhausted = False

    def _fill(self):
        while not self._exhausted and len(self._buf) < self.W + 1:
            try:
                self._buf.append(next(self._it))
            except StopIteration:
                self._exhausted = True

    def window_ids(self) -> list:
        """Ids of the W items after the current one (valid after `__next__`)."""
        return [self._ids_of(b) for b in list(self._buf)[1:self.W + 1]]

    def __iter__(self):
        return self

    def __next__(self):
        if self._buf:
            self._buf.popleft()
        self._fill()
        if not self._buf:
            raise StopIteration
        return self._buf[0], self.window_ids()
