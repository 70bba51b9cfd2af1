"""The teacher's live dashboard: an aiohttp server, a static page from the package, SSE updates.

What: ``ClassState`` is everything the projector shows, as one JSON snapshot with a version
number: who joined, each step's rounds (question, randomizer, ε), the raw reports as they
arrive, the debiased estimates with their confidence intervals, refusals, and the budget each
participant has spent. ``Dashboard`` serves it:

- ``GET /`` the page (``ldp/classroom/static``: HTML, CSS and JavaScript of its own, no CDN: it
  works offline), ``GET /state`` the snapshot, ``GET /events`` Server-Sent Events: the
  snapshot, then a new one after every change (at most the latest: a slow browser skips
  versions, never falls behind);
- ``GET /qr.svg`` the join command as a QR code (``segno``), ``GET /ca.pem`` the class CA's
  certificate (public: a student checks it against the fingerprint in the join command);
- ``POST /seat`` gives a student a seat. The request proves knowledge of the enrolment token
  without sending it (HMAC-SHA256 of the name and a fresh nonce under the token), because this
  HTTP port is plaintext; the same nonce gets the same seat back (a replay takes no new seat).

Guarantees: everything here is what the aggregator already knows (docs/design.md §2a): ε-LDP
reports, refusals, declared budgets and the ledgers' spent units (diagnostics); no record, key
or token is in a snapshot (tests/classroom/test_dashboard.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import io
import json
import re
import time
from collections.abc import Callable
from importlib import resources
from typing import Any

from aiohttp import web

from ldp.classroom.enrol import FINGERPRINT_HEX, ca_fingerprint, seat_proof
from ldp.core.errors import LDPError

__all__ = ["ClassState", "Dashboard", "seat_proof", "ca_fingerprint", "FINGERPRINT_HEX"]

_NAME = re.compile(r"[A-Za-z0-9 ._-]{1,40}")
_NONCE = re.compile(r"[0-9a-f]{32}")
MAX_EVENTS = 30


class ClassState:
    """The dashboard's data: a JSON-able dict and a version bumped at every change."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.version = 0
        self.data: dict[str, Any] = {"class": info, "students": {}, "steps": [], "events": [], "finished": False}
        self._changed = asyncio.Condition()
        self.change_times: list[tuple[int, float]] = []  # (version, time.time()) of recent changes

    def snapshot(self) -> dict[str, Any]:
        return {"version": self.version, **self.data}

    def changed(self) -> None:
        """Publish a change: every SSE stream sends the new snapshot."""
        self.version += 1
        self.change_times.append((self.version, time.time()))
        del self.change_times[:-1000]
        loop_running = True
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            loop_running = False
        if loop_running:
            asyncio.ensure_future(self._notify())

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def wait_newer(self, version: int, timeout_s: float) -> bool:
        """Wait until the state is newer than ``version`` (or anyone is woken: ``_notify``);
        False after ``timeout_s``."""
        async with self._changed:
            if self.version > version:
                return True
            try:
                await asyncio.wait_for(self._changed.wait(), timeout_s)
            except TimeoutError:
                return False
        return True

    def event(self, text: str) -> None:
        self.data["events"] = [*self.data["events"], {"time": time.time(), "text": text}][-MAX_EVENTS:]
        self.changed()


class Dashboard:
    """The aiohttp app of the dashboard; ``await start(host, port)``, ``await stop()``."""

    def __init__(
        self,
        state: ClassState,
        *,
        token: str,
        ca_pem: bytes,
        join_command: str,
        allocate: Callable[[str, str], dict[str, Any]],
        keepalive_s: float = 15.0,
    ) -> None:
        self.state = state
        self._token = token
        self.ca_pem = ca_pem
        self.join_command = join_command
        self._allocate = allocate  # (name, nonce) -> the seat's answer (raises LDPError when full)
        self.keepalive_s = keepalive_s
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._streams: set[web.StreamResponse] = set()
        self._closing = False
        self.app = web.Application()
        self.app.add_routes(
            [
                web.get("/", self._index),
                web.get("/app.js", self._static("app.js", "application/javascript")),
                web.get("/style.css", self._static("style.css", "text/css")),
                web.get("/state", self._state),
                web.get("/events", self._events),
                web.get("/qr.svg", self._qr),
                web.get("/ca.pem", self._ca),
                web.post("/seat", self._seat),
            ]
        )

    async def start(self, host: str, port: int) -> int:
        runner = web.AppRunner(self.app, access_log=None, handle_signals=False, shutdown_timeout=2.0)
        await runner.setup()
        site = web.TCPSite(runner, host, port, reuse_address=True)
        await site.start()
        self._runner = runner
        sockets = getattr(site._server, "sockets", None) or []  # noqa: SLF001 - the port the OS chose for port 0
        self.port = int(sockets[0].getsockname()[1]) if sockets else port
        return self.port

    async def stop(self) -> None:
        """End every SSE stream (their handlers return), then stop serving."""
        self._closing = True
        await self.state._notify()  # noqa: SLF001 - wakes the SSE handlers, which see _closing
        for stream in list(self._streams):
            with contextlib.suppress(Exception):
                await stream.write_eof()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    # --- handlers ---

    async def _index(self, request: web.Request) -> web.Response:
        """The page, with the current snapshot inlined (first paint needs no round trip)."""
        snapshot = _dumps(self.state.snapshot()).replace("</", "<\\/")
        inline = f'<script id="initial-state" type="application/json">{snapshot}</script>\n<script src="/app.js"></script>'
        html = _asset("index.html").replace('<script src="/app.js"></script>', inline, 1)
        return web.Response(text=html, content_type="text/html", charset="utf-8", headers={"Cache-Control": "no-store"})

    def _static(self, name: str, content_type: str) -> Callable[[web.Request], Any]:
        async def handler(request: web.Request) -> web.Response:
            return web.Response(text=_asset(name), content_type=content_type, charset="utf-8")

        return handler

    async def _state(self, request: web.Request) -> web.Response:
        return web.json_response(self.state.snapshot(), headers={"Cache-Control": "no-store"}, dumps=_dumps)

    async def _events(self, request: web.Request) -> web.StreamResponse:
        """Server-Sent Events: the snapshot now, then the latest one after each change."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"})
        await response.prepare(request)
        self._streams.add(response)
        sent = -1
        try:
            while not self._closing:
                if self.state.version > sent:
                    sent = self.state.version
                    body = _dumps(self.state.snapshot())
                    await response.write(f"id: {sent}\nevent: state\ndata: {body}\n\n".encode())
                elif not await self.state.wait_newer(sent, self.keepalive_s):
                    await response.write(b": keepalive\n\n")  # proxies and browsers keep the stream open
        except (ConnectionResetError, asyncio.CancelledError, RuntimeError):
            pass
        finally:
            self._streams.discard(response)
        return response

    async def _qr(self, request: web.Request) -> web.Response:
        import segno

        out = io.BytesIO()
        segno.make(self.join_command, error="m").save(out, kind="svg", scale=4, dark="#000", light="#fff", xmldecl=True)
        return web.Response(body=out.getvalue(), content_type="image/svg+xml")

    async def _ca(self, request: web.Request) -> web.Response:
        return web.Response(body=self.ca_pem, content_type="application/x-pem-file")

    async def _seat(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            return web.json_response({"error": "the body must be JSON {name, nonce, proof}"}, status=400)
        if not isinstance(body, dict):
            return web.json_response({"error": "the body must be JSON {name, nonce, proof}"}, status=400)
        name, nonce, proof = str(body.get("name", "")), str(body.get("nonce", "")), str(body.get("proof", ""))
        if not _NAME.fullmatch(name) or not _NONCE.fullmatch(nonce):
            return web.json_response({"error": "name: 1-40 letters, digits, space . _ -; nonce: 32 hex digits"}, status=400)
        if not hmac.compare_digest(proof, seat_proof(self._token, name, nonce)):
            return web.json_response({"error": "not enrolled: the proof does not match this class's token"}, status=403)
        try:
            answer = self._allocate(name, nonce)
        except LDPError as exc:
            return web.json_response({"error": str(exc)}, status=409)
        return web.json_response(answer)


def _dumps(data: Any) -> str:
    """Strict JSON (no NaN or Infinity, which browsers' JSON.parse rejects): a ValueError here is a bug."""
    return json.dumps(data, separators=(",", ":"), allow_nan=False)


def _asset(name: str) -> str:
    return resources.files("ldp.classroom").joinpath("static", name).read_text(encoding="utf-8")
