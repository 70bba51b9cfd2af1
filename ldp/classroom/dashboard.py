"""The teacher's live dashboard: an aiohttp server, a static page from the package, SSE updates.

What: ``ClassState`` is everything the projector shows, as one JSON snapshot with a version
number: who joined, each step's rounds (question, randomizer, ε), the raw reports as they
arrive, the debiased estimates with their confidence intervals, refusals, and the budget each
participant has spent. ``Dashboard`` serves it:

- ``GET /`` the page (``ldp/classroom/static``: HTML, CSS and JavaScript of its own, no CDN: it
  works offline) with the current snapshot as an inert JSON data block (``inline_json``: every
  ``<``, ``>``, ``&``, U+2028 and U+2029 escaped, so no text in it can end the block or open a
  comment), ``GET /state`` the snapshot, ``GET /events`` Server-Sent Events: the snapshot, then
  a new one after every change (at most the latest: a slow browser skips versions, never falls
  behind);
- ``GET /ca.pem`` the class CA's certificate (public: a student checks it against the
  fingerprint in the join command);
- ``POST /seat`` gives a student a seat. The request proves knowledge of the enrolment token
  without sending it (HMAC-SHA256 of the name, a fresh nonce and the seat commitment under the
  token, ``enrol.seat_proof``), because this HTTP port is plaintext; the same request gets the
  same seat back (a replay takes no new seat). Whether a seat is given is the teacher's rule
  (``allocate``: one seat per machine, docs/classroom.md "Seats").

Guarantees (docs/security.md, I5): everything here is what the aggregator already knows
(docs/design.md §2a): ε-LDP reports, refusals, declared budgets and the ledgers' spent units
(diagnostics); no record, key or token is in anything served (the token is also redacted from
every snapshot served as a second line of defence); every response carries a Content-Security-Policy that
allows only the page's own script and style (no inline script), and ``nosniff``; the page renders
every text with ``textContent`` (``static/app.js``); malformed input to any endpoint gets a 4xx
with a message, never a traceback (tests/classroom/test_classroom_abuse.py fuzzes them).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import re
import time
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from ldp.classroom.enrol import FINGERPRINT_HEX, ca_fingerprint, name_problem, seat_proof
from ldp.core.errors import LDPError

__all__ = ["ClassState", "Dashboard", "SeatRequest", "seat_proof", "ca_fingerprint", "FINGERPRINT_HEX", "clean_text", "inline_json", "CSP"]

log = logging.getLogger(__name__)

_NONCE = re.compile(r"[0-9a-f]{32}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
MAX_EVENTS = 30
MAX_BODY = 4096  # bytes of a seat request (its JSON is ~250 bytes); more is a 413
MAX_STREAMS = 256  # open SSE streams in all (a projector, the teacher's laptop, a few curious students)
MAX_STREAMS_PER_ADDRESS = 16
SLOT = "__INITIAL_STATE__"  # where static/index.html takes the snapshot

# Only the page's own script and stylesheet run: no inline script, no eval, no other origin; the
# page cannot be framed, and it fetches only from where it came from (its /state and /events).
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
# JSON inside an HTML <script> data block: the HTML tokenizer ends the block at "</script" and
# enters its "escaped" states at "<!--" (after which "<script" changes where the block ends), so
# none of < > & may appear raw; U+2028/2029 are escaped for old JavaScript parsers.
_INLINE_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def inline_json(data: Any) -> str:
    """``data`` as strict JSON that is safe as the content of an HTML ``<script type="application/json">``
    block: ``JSON.parse`` of the block's ``textContent`` gives ``data`` back, and no string in it can
    end the block or change how the tokenizer reads the rest of the page (HTML Living Standard §13.2.5,
    script data states)."""
    return _dumps(data).translate(_INLINE_ESCAPES)


def clean_text(text: Any, limit: int = 300) -> str:
    """Text a student sent, fit to be shown anywhere (the page, the teacher's terminal, a log line):
    control and format characters (Unicode category C: terminal escapes, bidirectional overrides,
    NUL) are replaced by U+FFFD, and it is clipped to ``limit`` characters. It is still *text*:
    the page escapes it where it is shown (``textContent``; ``inline_json``)."""
    out = "".join("\ufffd" if unicodedata.category(c).startswith("C") else c for c in str(text))
    return out if len(out) <= limit else out[: limit - 1] + "…"


class _NoTracebacks(logging.Filter):
    """On aiohttp's server logger: a request that is not HTTP (answered 400 by aiohttp) is not the
    teacher's business, so says nothing; anything else it logs becomes one line, no traceback
    (I6: a student's bytes never print a traceback on the teacher's terminal)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            return False
        if exc is not None:
            record.msg, record.args = f"dashboard: {record.getMessage()}: {type(exc).__name__}: {clean_text(exc, 200)}", ()
            record.exc_info, record.exc_text = None, None
        return True


def _quiet_aiohttp() -> None:
    server = logging.getLogger("aiohttp.server")
    if not any(isinstance(f, _NoTracebacks) for f in server.filters):
        server.addFilter(_NoTracebacks())


@dataclass(frozen=True)
class SeatRequest:
    """A verified ``POST /seat``: the student's name, the request's nonce, the seat commitment
    (``enrol.seat_commit`` of a secret the student keeps) and the address it came from."""

    name: str
    nonce: str
    commit: str
    address: str


class ClassState:
    """The dashboard's data: a JSON-able dict and a version bumped at every change."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.version = 0
        self.data: dict[str, Any] = {"class": info, "students": {}, "steps": [], "events": [], "finished": False}
        self._waiters: list[asyncio.Future[None]] = []
        self.change_times: list[tuple[int, float]] = []  # (version, time.time()) of recent changes

    def snapshot(self) -> dict[str, Any]:
        return {"version": self.version, **self.data}

    def changed(self) -> None:
        """Publish a change: every SSE stream sends the new snapshot."""
        self.version += 1
        self.change_times.append((self.version, time.time()))
        del self.change_times[:-1000]
        self.wake()

    def wake(self) -> None:
        """Wake every ``wait_newer`` now (no task is created: nothing is left pending at shutdown)."""
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    async def wait_newer(self, version: int, timeout_s: float) -> bool:
        """Wait until the state is newer than ``version`` (or anyone is woken: ``wake``);
        False after ``timeout_s``."""
        if self.version > version:
            return True
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            with contextlib.suppress(ValueError):
                self._waiters.remove(fut)
            return False
        return True

    def event(self, text: str) -> None:
        """Add a line to "What happened": numbered from 1 over the whole class (``n``), though
        only the last ``MAX_EVENTS`` are kept, so a number never changes as the list scrolls."""
        events = self.data["events"]
        n = (events[-1].get("n", len(events)) if events else 0) + 1
        self.data["events"] = [*events, {"n": n, "time": time.time(), "text": text}][-MAX_EVENTS:]
        self.changed()


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Dashboard:
    """The aiohttp app of the dashboard; ``await start(host, port)``, ``await stop()``.

    ``allocate(SeatRequest)`` answers a verified seat request (raises ``LDPError``, shown to the
    student with HTTP 409, when it gives no seat)."""

    def __init__(
        self,
        state: ClassState,
        *,
        token: str,
        ca_pem: bytes,
        allocate: Callable[[SeatRequest], dict[str, Any]],
        keepalive_s: float = 15.0,
    ) -> None:
        self.state = state
        self._token = token
        self.ca_pem = ca_pem
        self._allocate = allocate
        self.keepalive_s = keepalive_s
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._streams: dict[web.StreamResponse, str] = {}  # open SSE streams -> the address they came from
        self._closing = False
        self.app = web.Application(client_max_size=MAX_BODY, middlewares=[self._errors])
        self.app.on_response_prepare.append(self._secure_headers)
        self.app.add_routes(
            [
                web.get("/", self._index),
                web.get("/app.js", self._static("app.js", "application/javascript")),
                web.get("/style.css", self._static("style.css", "text/css")),
                web.get("/state", self._state),
                web.get("/events", self._events),
                web.get("/ca.pem", self._ca),
                web.post("/seat", self._seat),
            ]
        )

    async def start(self, host: str, port: int) -> int:
        _quiet_aiohttp()
        runner = web.AppRunner(self.app, access_log=None, handle_signals=False, shutdown_timeout=2.0)
        await runner.setup()
        site = web.TCPSite(runner, host, port, reuse_address=True)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        sockets = getattr(site._server, "sockets", None) or []  # noqa: SLF001 - the port the OS chose for port 0
        self.port = int(sockets[0].getsockname()[1]) if sockets else port
        return self.port

    async def stop(self) -> None:
        """End every SSE stream (their handlers return), then stop serving."""
        self._closing = True
        self.state.wake()  # the SSE handlers see _closing and return
        for stream in list(self._streams):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(stream.write_eof(), 1.0)
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    # --- every response ---

    @staticmethod
    async def _secure_headers(request: web.Request, response: web.StreamResponse) -> None:
        for key, value in _HEADERS.items():
            response.headers.setdefault(key, value)
        response.headers.setdefault("Cache-Control", "no-store")

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Nothing a request holds raises out of a handler: HTTP errors (404, 405, 413) pass with
        their message; anything else is a bug, answered 500 with one logged line (no traceback)."""
        try:
            return await handler(request)
        except web.HTTPException:
            raise
        except (asyncio.CancelledError, ConnectionResetError):
            raise
        except Exception as exc:  # noqa: BLE001 - one request must never take the dashboard down
            log.warning("dashboard: %s %s failed: %s: %s", request.method, request.path, type(exc).__name__, clean_text(exc, 200))
            return web.json_response({"error": "the dashboard could not answer this request"}, status=500)

    def _public(self, text: str) -> str:
        """A body about to be served: the token never is (it is never put in the state; this is the
        second line of defence, e.g. a student who names themselves after it)."""
        return text.replace(self._token, "<token withheld>") if self._token else text

    # --- handlers ---

    async def _index(self, request: web.Request) -> web.Response:
        """The page, with the current snapshot as an inert JSON data block (first paint needs no round trip)."""
        html = _asset("index.html").replace(SLOT, self._public(inline_json(self.state.snapshot())), 1)
        return web.Response(text=html, content_type="text/html", charset="utf-8")

    def _static(self, name: str, content_type: str) -> Handler:
        async def handler(request: web.Request) -> web.Response:
            return web.Response(text=_asset(name), content_type=content_type, charset="utf-8")

        return handler

    async def _state(self, request: web.Request) -> web.Response:
        return web.Response(text=self._public(_dumps(self.state.snapshot())), content_type="application/json", charset="utf-8")

    async def _events(self, request: web.Request) -> web.StreamResponse:
        """Server-Sent Events: the snapshot now, then the latest one after each change."""
        address = request.remote or "?"
        if len(self._streams) >= MAX_STREAMS or sum(a == address for a in self._streams.values()) >= MAX_STREAMS_PER_ADDRESS:
            raise web.HTTPTooManyRequests(text=f"too many open event streams (at most {MAX_STREAMS_PER_ADDRESS} per address, {MAX_STREAMS} in all); close some pages")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"})
        await response.prepare(request)
        self._streams[response] = address
        sent = -1
        try:
            while not self._closing:
                if self.state.version > sent:
                    sent = self.state.version
                    body = self._public(_dumps(self.state.snapshot()))
                    await response.write(f"id: {sent}\nevent: state\ndata: {body}\n\n".encode())
                elif not await self.state.wait_newer(sent, self.keepalive_s):
                    await response.write(b": keepalive\n\n")  # proxies and browsers keep the stream open
        except (ConnectionError, asyncio.CancelledError, RuntimeError):
            pass  # the browser left, or the dashboard is stopping: nothing to report
        finally:
            self._streams.pop(response, None)
        return response

    async def _ca(self, request: web.Request) -> web.Response:
        return web.Response(body=self.ca_pem, content_type="application/x-pem-file")

    async def _seat(self, request: web.Request) -> web.Response:
        usage = "the body is a JSON object {name, nonce, commit, proof}"
        raw = await request.read()  # at most MAX_BODY bytes: aiohttp answers 413 beyond
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):  # RecursionError: JSON nested thousands deep
            return _error(400, f"{usage}; this one is not JSON")
        if not isinstance(body, dict):
            return _error(400, usage)
        fields = {k: body.get(k) for k in ("name", "nonce", "commit", "proof")}
        wrong = [k for k, v in fields.items() if not isinstance(v, str)]
        if wrong:
            return _error(400, f"{usage}, each a string; missing or not a string: {', '.join(wrong)}")
        name, nonce, commit, proof = (str(fields[k]) for k in ("name", "nonce", "commit", "proof"))
        problem = name_problem(name)
        if problem:
            return _error(400, problem)
        if not _NONCE.fullmatch(nonce) or not _HEX64.fullmatch(commit):
            return _error(400, "nonce: 32 lower-case hex digits; commit: 64 lower-case hex digits")
        if not hmac.compare_digest(proof.encode(), seat_proof(self._token, name, nonce, commit).encode()):
            return _error(403, "not enrolled: the proof does not match this class's token")
        try:
            answer = self._allocate(SeatRequest(name, nonce, commit, request.remote or "?"))
        except LDPError as exc:
            return _error(409, str(exc))
        return web.json_response(answer)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def _dumps(data: Any) -> str:
    """Strict JSON (no NaN or Infinity, which browsers' JSON.parse rejects): a ValueError here is a bug."""
    return json.dumps(data, separators=(",", ":"), allow_nan=False)


def _asset(name: str) -> str:
    return resources.files("ldp.classroom").joinpath("static", name).read_text(encoding="utf-8")
