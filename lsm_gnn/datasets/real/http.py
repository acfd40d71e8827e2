"""Resumable HTTP downloads that never prompt.

`fetch(url, target)` streams into `<target>.part` and renames it to `target` only after the
checks pass, so an existing `target` is always a complete, verified file.

* Resume: an existing `.part` is continued with `Range: bytes=<have>-`. A 206 answer is appended
  (its Content-Range start must match); a 200 answer means the server ignored the Range, so the
  part file is restarted from byte 0; a 416 answer with `bytes */<total>` equal to what we have
  means the part file is already complete.
* A dropped connection (or a body shorter than Content-Length) is retried from where it stopped,
  up to RETRIES consecutive attempts that bring no new bytes, with exponential back-off; every
  retry is printed (stderr). A host name that does not resolve fails at once (no network).
* Checks, streaming (never the whole file in memory): the total size announced by the server
  must equal the catalog's `size` when one is known; the final length must equal the announced
  total; the MD5 must match when one is published (the prefix of a resumed part file is hashed
  from disk first). A failed checksum deletes the part file; a short one is kept for resuming.
* Bodies are read undecoded (`Accept-Encoding: identity`), so byte offsets are file offsets.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import socket
import sys
import time
from pathlib import Path

import requests
import urllib3
from tqdm import tqdm

from lsm_gnn.utils.atomic import WRITE_ERRNOS
from lsm_gnn.utils.errors import DownloadError, OutputError

log = logging.getLogger(__name__)

RETRIES = 8              # consecutive failed attempts (no new bytes) before giving up
BACKOFF_S = 1.0          # first retry delay; doubles per failure, capped at 60 s
TIMEOUT_S = 60.0         # connect and per-read timeout
CHUNK_BYTES = 1 << 20
HASH_CHUNK = 1 << 24
USER_AGENT = "lsm-gnn-downloader/1"

_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
_UNSATISFIED_RANGE = re.compile(r"bytes\s+\*/(\d+)")


class _Retry(Exception):
    """A transient failure: try again from the current length of the part file."""


def _show(progress: bool) -> bool:
    return bool(progress) and sys.stderr.isatty()


def _hash_prefix(path: Path, nbytes: int):
    h = hashlib.md5()
    if nbytes <= 0:
        return h
    with open(path, "rb") as f:
        left = nbytes
        while left > 0:
            chunk = f.read(min(HASH_CHUNK, left))
            if not chunk:
                break
            h.update(chunk)
            left -= len(chunk)
    return h


def say(msg: str) -> None:
    """A line for the user beside the progress bar (every retry is printed: a download that waits
    is never silent)."""
    tqdm.write(msg, file=sys.stderr)


def _short(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text[:200]}"


def _unresolved_host(e: BaseException) -> str | None:
    """The host name when `e` (or what it wraps) is a failed DNS look-up, else None."""
    seen, todo = set(), [e]
    while todo:
        x = todo.pop()
        if x is None or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, urllib3.exceptions.NameResolutionError):
            return getattr(x, "_host", None) or str(getattr(getattr(x, "conn", None), "host", "?"))
        if isinstance(x, socket.gaierror):
            return "?"
        todo += [getattr(x, "reason", None), x.__cause__, x.__context__]
        todo += [a for a in getattr(x, "args", ()) if isinstance(a, BaseException)]
    return None


def fetch(url: str, target: str | os.PathLike, *, md5: str | None = None, size: int | None = None,
          progress: bool = True, session: requests.Session | None = None) -> Path:
    """Download `url` to `target` (resuming `<target>.part`); returns `target`.

    Raises DownloadError on an HTTP error status, a size or MD5 mismatch, or when RETRIES
    consecutive attempts fail (the part file is then kept, so a rerun resumes).
    """
    target = Path(target)
    if target.exists():
        have = target.stat().st_size
        if size is not None and have != size:
            raise DownloadError(f"{target}: exists with {have} bytes, expected {size}; "
                                "delete it to download it again")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    own_session = session is None
    sess = session or requests.Session()
    st = _State(part, md5)
    failures = 0
    bar = tqdm(total=size, initial=st.have, unit="B", unit_scale=True, unit_divisor=1024,
               desc=target.name, disable=not _show(progress), leave=False)
    try:
        while True:
            before = st.have
            try:
                if _attempt(sess, url, st, size, bar):
                    break
                raise _Retry(f"body ended at byte {st.have} of {st.total}")
            except (_Retry, requests.ConnectionError, requests.Timeout,
                    requests.exceptions.ChunkedEncodingError, urllib3.exceptions.HTTPError) as e:
                host = _unresolved_host(e)
                if host is not None:  # no DNS answer: retrying will not bring the network back
                    raise DownloadError(f"{url}: the host {host} does not resolve (no network, or a wrong "
                                        "--base-url); nothing was downloaded") from None
                st.resync()
                failures = 0 if st.have > before else failures + 1
                if failures > RETRIES:
                    raise DownloadError(f"{url}: giving up after {RETRIES} retries without progress "
                                        f"({type(e).__name__}: {e}); {st.have} bytes kept in {part}, "
                                        "run again to resume") from None
                wait = min(60.0, BACKOFF_S * 2 ** (failures - 1)) if failures else 0.0
                say(f"{url}: {_short(e)}; retry {max(failures, 1)} of {RETRIES} from byte {st.have}"
                    + (f" in {wait:g} s" if wait else ""))
                if wait:
                    time.sleep(wait)
            except OSError as e:
                if e.errno in WRITE_ERRNOS:
                    raise OutputError.from_os_error(part, e) from None
                raise
    finally:
        bar.close()
        if own_session:
            sess.close()

    found = part.stat().st_size
    if st.total is not None and found != st.total:
        part.unlink()
        raise DownloadError(f"{url}: downloaded {found} bytes, the server announced {st.total}; "
                            "the part file was deleted, run again")
    if size is not None and found != size:
        part.unlink()
        raise DownloadError(f"{url}: size mismatch (expected {size} bytes, found {found}); "
                            "the part file was deleted")
    if md5 is not None:
        got = st.digest.hexdigest()
        if got != md5.lower():
            part.unlink()
            raise DownloadError(f"{url}: MD5 mismatch (expected {md5}, found {got}); "
                                "the part file was deleted, run again to download it afresh")
    os.replace(part, target)
    return target


class _State:
    """Bytes in the part file, the announced total and the running MD5 (kept in step)."""

    def __init__(self, part: Path, md5: str | None):
        self.part, self.md5 = part, md5
        self.have = part.stat().st_size if part.exists() else 0
        self.digest = _hash_prefix(part, self.have) if md5 else None
        self.total: int | None = None

    def restart(self):
        if self.part.exists():
            self.part.unlink()
        self.have = 0
        self.digest = hashlib.md5() if self.md5 else None

    def resync(self):
        """After an interrupted read: trust the file on disk (rehash only if it disagrees)."""
        on_disk = self.part.stat().st_size if self.part.exists() else 0
        if on_disk != self.have:
            self.have = on_disk
            self.digest = _hash_prefix(self.part, on_disk) if self.md5 else None


def _attempt(sess, url, st: _State, size, bar) -> bool:
    """One GET, appending to the part file; True when the file is complete."""
    headers = {"Accept-Encoding": "identity", "User-Agent": USER_AGENT}
    if st.have:
        headers["Range"] = f"bytes={st.have}-"
    with sess.get(url, headers=headers, stream=True, timeout=TIMEOUT_S) as r:
        status = r.status_code
        if status == 416 and st.have:
            m = _UNSATISFIED_RANGE.match(r.headers.get("Content-Range", ""))
            if m and int(m.group(1)) == st.have:
                st.total = st.have
                return True
            log.info("%s: range %d- not satisfiable; restarting from byte 0", url, st.have)
            st.restart()
            bar.reset(total=bar.total)
            return False
        if status >= 500 or status == 429:
            raise _Retry(f"HTTP {status}")
        if status >= 400:
            raise DownloadError(f"{url}: HTTP {status} {r.reason}")
        if status == 206:
            m = _CONTENT_RANGE.match(r.headers.get("Content-Range", ""))
            if not m or int(m.group(1)) != st.have:
                log.info("%s: unexpected Content-Range %r; restarting from byte 0", url,
                         r.headers.get("Content-Range"))
                st.restart()
                bar.reset(total=bar.total)
                return False
            announced = int(m.group(3)) if m.group(3) != "*" else None
            mode = "ab"
        elif status == 200:
            if st.have:
                log.info("%s: server ignored the Range request; restarting from byte 0", url)
                st.restart()
                bar.reset(total=bar.total)
            cl = r.headers.get("Content-Length")
            announced = int(cl) if cl is not None else None
            mode = "wb"
        else:
            raise DownloadError(f"{url}: unexpected HTTP {status} {r.reason}")
        if announced is not None:
            if size is not None and announced != size:
                raise DownloadError(f"{url}: the server offers {announced} bytes, expected {size} "
                                    "(wrong file, or truncated on the server)")
            if st.total is not None and announced != st.total:
                log.info("%s: remote size changed from %d to %d; restarting", url, st.total, announced)
                st.restart()
                st.total = None
                return False
            st.total = announced
            if bar.total != announced:
                bar.total = announced
                bar.refresh()
        with open(st.part, mode) as f:
            for chunk in r.raw.stream(CHUNK_BYTES, decode_content=False):
                f.write(chunk)
                if st.digest is not None:
                    st.digest.update(chunk)
                st.have += len(chunk)
                bar.update(len(chunk))
    return st.total is None or st.have >= st.total
