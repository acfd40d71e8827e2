"""Fault cases of `dataset download` (a loopback server; an unresolvable name)."""

from __future__ import annotations

import contextlib
import threading
import time

from lsm_gnn.check.faults.base import Ctx, GOOD, Outcome, case, judge_error


# downloads (a loopback server; an unresolvable name)
@case("download-unresolvable-host", "dataset download from http://nonexistent.invalid", timeout_s=30)
def _dl_dns(ctx: Ctx) -> Outcome:
    t0 = time.monotonic()
    out = judge_error(ctx.cli("dataset", "download", "igb", "--size", "tiny", "--dest", ctx.tmp / "raw",
                              "--base-url", "http://nonexistent.invalid/x", "--no-progress"), names="nonexistent")
    secs = time.monotonic() - t0
    out.detail += f" after {secs:.1f} s"
    if out.outcome in GOOD and secs > 15:
        return Outcome("hang", out.detail)
    return out


@contextlib.contextmanager
def _server(handler_fn):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class H(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            handler_fn(self)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


@case("download-server-errors", "dataset download from a loopback server that answers 503 to every request"
      , timeout_s=60)
def _dl_retry(ctx: Ctx) -> Outcome:
    import lsm_gnn.datasets.real.http as http

    http.BACKOFF_S = 0.005
    calls = []

    def answer(h):
        calls.append(1)
        h.send_response(503)
        h.send_header("Content-Length", "0")
        h.end_headers()

    with _server(answer) as url:
        ran = ctx.cli("dataset", "download", "igb", "--size", "tiny", "--dest", ctx.tmp / "raw",
                      "--base-url", url, "--no-progress")
    retries = ran.output.count("retry")
    out = judge_error(ran)
    out.detail += f"; {len(calls)} requests, {retries} retries printed"
    if out.outcome in GOOD and retries < len(calls) - 1:
        return Outcome("silently wrong", out.detail + " (retries not all printed)")
    return out


@case("download-404", "dataset download of a file the loopback server does not have", timeout_s=60)
def _dl_404(ctx: Ctx) -> Outcome:
    def answer(h):
        h.send_response(404)
        h.send_header("Content-Length", "0")
        h.end_headers()

    with _server(answer) as url:
        return judge_error(ctx.cli("dataset", "download", "igb", "--size", "tiny", "--dest", ctx.tmp / "raw",
                                   "--base-url", url, "--no-progress"), names="404")


@case("download-disk-full", "dataset download onto a full file system from a loopback server", timeout_s=60)
def _dl_full(ctx: Ctx) -> Outcome:
    from lsm_gnn.check.sandbox import full_dir

    ctx.note(full_dir(ctx.tmp / "full", 64 * 1024))
    body = b"\0" * (1 << 20)

    def answer(h):  # no Content-Length: the body runs until the connection closes
        h.send_response(200)
        h.end_headers()
        with contextlib.suppress(OSError):
            h.wfile.write(body)

    with _server(answer) as url:
        return judge_error(ctx.cli("dataset", "download", "igb", "--size", "tiny", "--dest", ctx.tmp / "full" / "raw",
                                   "--base-url", url, "--no-progress"), names="full")
