"""Checkpoints of a preparation: `<out>.prepare-state/` next to the output directory.

Each step writes its outputs under the state directory and is then recorded in `state.json`
(atomically), so a rerun after an interruption skips finished steps. The state is tied to a
fingerprint of the inputs (dataset, raw file paths, sizes and modification times): if the raw
files changed, the old state is discarded. A lock file stops two preparations of the same output
from running at once. The state directory is removed once the dataset is committed.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
from pathlib import Path

from lsm_gnn.utils.atomic import write_json
from lsm_gnn.utils.errors import InputError

log = logging.getLogger(__name__)
STATE_VERSION = 1


def fingerprint(name: str, inputs: list[Path], extra: dict | None = None) -> dict:
    files = []
    for p in sorted(set(Path(x) for x in inputs)):
        st = p.stat()
        files.append([os.fspath(p.resolve()), st.st_size, st.st_mtime_ns])
    return {"version": STATE_VERSION, "name": name, "files": files, **(extra or {})}


class PrepareState:
    def __init__(self, out_dir: str | os.PathLike, fp: dict):
        out = Path(out_dir)
        self.dir = out.parent / f"{out.name}.prepare-state"
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.dir / "lock", "w")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise InputError(f"{self.dir}: another preparation of {out} is running") from None
        self.path = self.dir / "state.json"
        self.data = {"fingerprint": fp, "done": {}}
        if self.path.is_file():
            try:
                old = json.loads(self.path.read_text())
            except json.JSONDecodeError:
                old = None
            if old and old.get("fingerprint") == fp:
                self.data = old
                if old["done"]:
                    log.info("resuming: steps already done: %s", ", ".join(old["done"]))
            else:
                log.info("%s: inputs changed since the interrupted run; starting over", self.dir)
                self._wipe()
        write_json(self.path, self.data)

    def _wipe(self):
        for p in self.dir.iterdir():
            if p.name != "lock":
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()

    def done(self, step: str) -> bool:
        return step in self.data["done"]

    def info(self, step: str) -> dict:
        """What a finished step recorded."""
        return self.data["done"][step]

    def mark(self, step: str, info: dict | None = None):
        self.data["done"][step] = info or {}
        write_json(self.path, self.data)

    def sub(self, rel: str) -> Path:
        p = self.dir / rel
        p.mkdir(parents=True, exist_ok=True)
        return p

    def close(self):
        if not self._lock.closed:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()

    def remove(self):
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
