"""The classroom dashboard over real HTTP (aiohttp's client): pages, snapshot, SSE, seats, the CA.

Also the pieces both sides share: the estimators the dashboard shows, the seat proof, and a
student refusing a teacher whose CA does not match the join command's fingerprint.
"""

from __future__ import annotations

import asyncio
import json
import math
import secrets
import types

import aiohttp
import numpy as np
import pytest

from ldp.classroom.dashboard import ClassState, Dashboard, SeatRequest
from ldp.classroom.enrol import ca_fingerprint, seat_commit, seat_proof
from ldp.classroom.lessons import TRAVEL, ClassPlan, Estimate, estimate_reports, sensitive_spec, travel_grr_spec, travel_oue_spec
from ldp.classroom.student import Answers, StudentHoldings, join
from ldp.core.concepts import concept_class
from ldp.core.errors import LDPError, ParameterError
from ldp.core.population import PopulationSpec
from ldp.core.rng import RandomSource

TOKEN = "t" * 43
CA = b"-----BEGIN CERTIFICATE-----\nnot a real one\n-----END CERTIFICATE-----\n"


async def _start(**kwargs):
    state = ClassState({"plan": ClassPlan(4, 10, 4).to_json()})
    seats: dict[str, int] = {}

    def allocate(request: SeatRequest) -> dict:
        if request.nonce not in seats:
            if len(seats) >= 2:
                raise ParameterError("the class is full")
            seats[request.nonce] = len(seats)
        return {"seat": seats[request.nonce], "grpc_port": 1, "plan": ClassPlan(4, 10, 4).to_json()}

    dash = Dashboard(state, token=TOKEN, ca_pem=CA, allocate=allocate, **kwargs)
    port = await dash.start("127.0.0.1", 0)
    dash.seats_given = seats  # type: ignore[attr-defined]  # for the tests
    return dash, state, f"http://127.0.0.1:{port}"


async def _next_event(lines: aiohttp.StreamReader, timeout_s: float = 60.0) -> dict:
    """The next ``state`` event of an SSE stream (comments skipped)."""
    data = None
    while True:
        line = (await asyncio.wait_for(lines.readline(), timeout_s)).decode().rstrip("\n")
        if line.startswith("data: "):
            data = json.loads(line[6:])
        elif line == "" and data is not None:
            return data


async def test_pages_state_and_assets_are_served_from_the_package():
    dash, state, url = await _start()
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(url + "/") as r:
                html = await r.text()
                assert r.status == 200 and r.content_type == "text/html"
                assert '<script src="/app.js">' in html and "http" not in html.split("<body>")[1].replace("http://www.w3.org", "")  # no CDN
            for path, kind in (("/app.js", "application/javascript"), ("/style.css", "text/css")):
                async with http.get(url + path) as r:
                    assert r.status == 200 and r.content_type == kind, path
                    assert len(await r.read()) > 100
            async with http.get(url + "/state") as r:
                snap = await r.json()
                assert snap["version"] == state.version and snap["class"]["plan"]["seats"] == 4
                assert TOKEN not in json.dumps(snap)  # the token is never in what the dashboard shows
            # An undefined number (no interval) is null in the JSON (browsers reject NaN).
            state.data["one"] = Estimate(("yes",), (1.0,), (math.nan,), (math.nan,), 1, (math.nan,)).to_json()
            state.changed()
            async with http.get(url + "/state") as r:
                assert '"low":[null]' in (await r.text()).replace(" ", "")
            async with http.get(url + "/") as r:
                page = await r.text()
                inline = page.split('<script id="initial-state" type="application/json">')[1].split("</script>")[0]
                assert "<" not in inline and ">" not in inline and "&" not in inline  # inline_json: inert in any HTML
                assert json.loads(inline)["one"]["high"] == [None] and json.loads(inline)["version"] == state.version
            async with http.get(url + "/ca.pem") as r:
                assert await r.read() == CA
            # A second line of defence: a token that reached the state anyway is withheld from every body.
            state.event(f"someone typed {TOKEN} into a name")
            for path in ("/", "/state"):
                async with http.get(url + path) as r:
                    text = await r.text()
                    assert TOKEN not in text and "someone typed <token withheld>" in text.replace("\\u003c", "<").replace("\\u003e", ">")
            async with http.get(url + "/nothing") as r:
                assert r.status == 404
            async with http.get(url + "/qr.svg") as r:  # it encoded the join command, token and all: gone
                assert r.status == 404
    finally:
        await dash.stop()


async def test_sse_sends_the_snapshot_then_every_change_at_once():
    dash, state, url = await _start(keepalive_s=0.2)
    try:
        async with aiohttp.ClientSession() as http, http.get(url + "/events") as r:
            assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
            first = await _next_event(r.content)
            assert first["version"] == state.version
            for k in range(5):  # pushed, not polled: every change arrives as its own event (measured: a few ms)
                state.event(f"change {k}")
                snap = await _next_event(r.content)
                assert snap["events"][-1]["text"] == f"change {k}" and snap["version"] == state.version
            # Quiet for longer than the keepalive: a comment line keeps the stream open.
            line = await asyncio.wait_for(r.content.readline(), 60.0)
            assert line.startswith(b": keepalive")
            # Many changes while the client is not reading: it gets the latest, never a backlog.
            for k in range(50):
                state.event(f"burst {k}")
            await asyncio.sleep(0.1)
            for _ in range(3):
                snap = await _next_event(r.content)
                if snap["version"] == state.version:
                    break
            assert snap["version"] == state.version and snap["events"][-1]["text"] == "burst 49"
            # Stopping the dashboard ends open streams (the teacher's Ctrl-C or Enter does not hang):
            # both waits are bounded generously, and neither reads the clock for a verdict.
            await asyncio.wait_for(dash.stop(), 60.0)
            rest = await asyncio.wait_for(r.content.read(), 60.0)
            assert b"data:" not in rest
    finally:
        await dash.stop()


async def test_a_seat_needs_the_token_proof_and_a_replay_gets_the_same_seat():
    dash, state, url = await _start()
    try:
        async with aiohttp.ClientSession() as http:
            nonce = secrets.token_hex(16)
            commit = seat_commit(secrets.token_hex(32))

            async def ask(body):
                async with http.post(url + "/seat", json=body) as r:
                    return r.status, await r.json(content_type=None)

            def request(name, nonce, token=TOKEN, proof_name=None, proof_commit=None):
                proof = seat_proof(token, proof_name or name, nonce, proof_commit or commit)
                return {"name": name, "nonce": nonce, "commit": commit, "proof": proof}

            good = request("ada", nonce)
            assert await ask(good) == (200, {"seat": 0, "grpc_port": 1, "plan": ClassPlan(4, 10, 4).to_json()})
            assert (await ask(good))[1]["seat"] == 0  # a replayed request takes no new seat
            other = secrets.token_hex(16)
            status, body = await ask(request("ada", other, token="u" * 43))
            assert status == 403 and "not enrolled" in body["error"]
            assert (await ask(request("bob", other, proof_name="ada")))[0] == 403  # proof for another name
            assert (await ask(request("bob", other, proof_commit="0" * 64)))[0] == 403  # proof for another commitment
            assert (await ask({"name": "bob", "nonce": other, "proof": ""}))[0] == 400  # no commitment
            assert (await ask(request("bob\x1b[2J", other)))[0] == 400  # a terminal escape is no name
            async with http.post(url + "/seat", data=b"not json") as r:
                assert r.status == 400
            assert (await ask(request("bob", other)))[1]["seat"] == 1
            third = secrets.token_hex(16)
            status, body = await ask(request("cy", third))
            assert status == 409 and "full" in body["error"]
    finally:
        await dash.stop()


async def test_a_student_refuses_a_teacher_whose_ca_does_not_match_the_fingerprint():
    dash, state, url = await _start()
    host = url.removeprefix("http://")
    base = dict(host=host, token=TOKEN, token_file=None, name="ada", budget=4.0, transcript=None, connect_timeout=5.0)

    def ns(**changes):
        return types.SimpleNamespace(**{**base, **changes})

    try:
        with pytest.raises(ParameterError, match="does not have the fingerprint"):
            await join(ns(ca=ca_fingerprint(b"another CA")), Answers(1, 0))
        assert dash.seats_given == {}  # no seat was even asked for
        with pytest.raises(ParameterError, match="fingerprint"):
            await join(ns(ca="zz"), Answers(1, 0))
        # The right fingerprint but a wrong token: the teacher gives no seat.
        with pytest.raises(ParameterError, match="not enrolled"):
            await join(ns(token="w" * 43, ca=ca_fingerprint(CA)), Answers(1, 0))
        assert dash.seats_given == {}
    finally:
        await dash.stop()


def test_seat_proof_depends_on_token_name_nonce_and_commitment():
    base = seat_proof(TOKEN, "ada", "0" * 32, "c" * 64)
    assert TOKEN not in base and len(base) == 64
    others = {seat_proof("u" * 43, "ada", "0" * 32, "c" * 64), seat_proof(TOKEN, "bob", "0" * 32, "c" * 64), seat_proof(TOKEN, "ada", "1" * 32, "c" * 64), seat_proof(TOKEN, "ada", "0" * 32, "d" * 64)}
    assert base not in others and len(others) == 4


def test_student_records_hold_the_answers_in_the_seats_first_row_only():
    plan = ClassPlan(3, 5, 4)
    cc = concept_class("masked_parity", 4)
    machine = PopulationSpec(cc, cc.random_target(np.random.default_rng(0)), plan.size, budget=4.0, seed=7)
    h = StudentHoldings(plan, 1, Answers(1, 2), machine)
    rows = h.records(plan.student_user(1), plan.per_seat)
    assert rows.shape == (6, plan.schema.width)
    assert rows[0, :2].tolist() == [1, 2] and (rows[1:, :2] == 0).all()
    assert (rows[:, 2:] == machine.records(6, 6)).all()  # MASKED-PARITY columns: generated on this machine
    plan.schema.validate_records(rows)
    with pytest.raises(ParameterError, match="seat 1 holds users 6..11"):
        h.records(0, 6)
    with pytest.raises(LDPError):
        Answers(2, 0)


def test_estimates_are_the_randomizers_unbiased_estimates_with_an_exact_interval():
    """The dashboard's estimate is the mean of the randomizer's own per-report unbiased estimates;
    its interval is mean ± 1.96·sd with the randomizer's exact sd (binary RR: √(pq/n)/(p − q)),
    not a sample sd. Checked exactly against a direct computation, and the interval's coverage
    checked on 400 seeded classes of 200 (binomial: at 95 % coverage, fewer than 360 hits has
    probability < 1e-4 — the false-alarm rate); a broken variant (the interval of the raw reports,
    without the debiasing's 1/(p − q)) fails the same check."""
    plan = ClassPlan(4, 1, 4)
    spec = sensitive_spec(1.0)
    from ldp.core.randomizers import LocalRandomizer

    rr = LocalRandomizer.build(spec, plan.schema).randomizer
    p, q = rr.keep_probability, rr.flip_probability
    truth = np.r_[np.ones(60), np.zeros(140)]
    hits = broken_hits = 0
    for t in range(400):
        reports = rr.sample(truth, RandomSource(t).for_request("classroom", 0, np.arange(200)))
        est = estimate_reports(spec, plan.schema, reports, label="yes")
        assert est is not None and est.labels == ("yes",) and est.n == 200
        per = rr.estimate(reports)
        assert math.isclose(est.values[0], float(per.mean()), rel_tol=0, abs_tol=1e-12)
        half = 1.959963984540054 * math.sqrt(p * q / 200) / (p - q)
        assert math.isclose(est.high[0] - est.low[0], 2 * half, abs_tol=1e-12)
        hits += est.low[0] <= 0.3 <= est.high[0]
        narrow = 1.959963984540054 * np.std(reports, ddof=1) / math.sqrt(200)  # forgot the 1/(p − q) of the debiasing
        broken_hits += est.values[0] - narrow <= 0.3 <= est.values[0] + narrow
    assert hits >= 360, hits
    assert broken_hits < 360, broken_hits  # too narrow: about 63 % coverage
    grr = estimate_reports(travel_grr_spec(1.0), plan.schema, np.array([0.0, 1.0, 1.0, 3.0]))
    assert grr is not None and grr.labels == TRAVEL and math.isclose(sum(grr.values), 1.0, abs_tol=1e-9)
    assert estimate_reports(spec, plan.schema, np.zeros(0)) is None


@pytest.mark.parametrize("spec", [sensitive_spec(1.0), travel_grr_spec(1.0), travel_oue_spec(1.0)], ids=["binary_rr", "grr", "oue"])
def test_an_interval_is_never_zero_width_when_every_report_agrees(spec):
    """Issue 29: lesson 2 showed ``bike: -1.164 [-1.164, -1.164]``: the sample sd of identical
    per-report estimates is 0. The exact variance does not depend on the reports agreeing: every
    interval has width 2·1.96·sd > 0, also from one report, and the sd is the oracle's exact one
    (``frequency_variance`` at the clipped estimate). The old estimator (the sample sd) fails the
    first assertion; no randomness is involved."""
    from ldp.core.frequency_oracles import frequency_variance
    from ldp.core.randomizers import LocalRandomizer

    plan = ClassPlan(4, 1, 4)
    r = LocalRandomizer.build(spec, plan.schema).randomizer
    one = r.sample(np.array([1.0]), RandomSource(3).for_request("classroom", 0, np.arange(1)))
    for n in (1, 6):
        same = np.repeat(np.asarray(one), n, axis=0)  # n identical reports
        est = estimate_reports(spec, plan.schema, same, label="yes")
        assert est is not None and est.n == n
        widths = np.subtract(est.high, est.low)
        assert np.all(widths > 0.1), (spec.kind, n, est)
        assert est.bounds == (0.0, 1.0)
        if spec.kind != "binary_rr":
            expected = np.sqrt(frequency_variance(r, np.clip(est.values, 0, 1), n))
            assert np.allclose(est.sd, expected, rtol=1e-12)
            assert np.allclose(widths, 2 * 1.959963984540054 * expected, rtol=1e-12)
    # An estimate of a fraction outside [0, 1] is kept as it is (unbiased), and the JSON says the range.
    est = estimate_reports(spec, plan.schema, np.repeat(np.asarray(one), 3, axis=0), label="yes")
    assert est is not None and est.to_json()["bounds"] == [0.0, 1.0]
    assert min(est.low) < 0 or max(est.high) > 1
