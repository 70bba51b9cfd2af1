"""``ldp-sim join HOST:PORT --token T --ca FINGERPRINT``: a student's machine in the classroom.

What: asks the student's private answers in the terminal (or reads them from ``--answers``), keeps
them in this process only, and serves them as one ordinary client process
(``ldp.wire.client.run_client``): one seat of the class, i.e. the student's own record and the
MASKED-PARITY records generated here (``StudentHoldings``), answered by the real ``Shard`` —
the same validation, ledger, refusals and AES-keyed randomness as every other client. Before
joining it fetches the class CA from the dashboard and checks it against the fingerprint in the
join command, so the gRPC connection reaches only the teacher's aggregator (TLS); it asks for a
seat proving the token without sending it (``dashboard.seat_proof``). For every round it prints
exactly what left: the randomized report, the ε charged, the budget spent — or that the
student's own ledger refused.

Guarantees: the answers and the report key never leave this process (the aggregator receives only
what ``Shard.answer`` returns); the budget is the student's ``--budget``, enforced here
(KLNRS Definition 4.4); a teacher asking for more is refused without a charge. The ledger lives
as long as this process (see docs/classroom.md: a restarted ``join`` starts a fresh budget).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import grpc
import numpy as np

from ldp.classroom.enrol import FINGERPRINT_HEX, SEAT_SECRET_HEADER, ca_fingerprint, seat_commit, seat_proof
from ldp.classroom.lessons import SENSITIVE_QUESTION, TRAVEL, TRAVEL_QUESTION, ClassPlan, class_target, question_of, report_text, warm_up
from ldp.core.concepts import concept_class
from ldp.core.errors import LDPError, ParameterError
from ldp.core.population import PopulationSpec
from ldp.core.schema import RECORD_DTYPE, Schema
from ldp.local.ledger_store import LedgerStore
from ldp.local.messages import RoundReply, RoundRequest
from ldp.local.shard import Holdings, Shard
from ldp.wire.aggregator import ShardClaim
from ldp.wire.client import EXIT_REJECTED, ClientLimits, run_client
from ldp.wire.client_config import ClientConfig
from ldp.wire.tls import ClientTLS, token_metadata

__all__ = ["Answers", "JoinOptions", "StudentHoldings", "StudentConfig", "check_join", "fetch_ca", "run_join", "ask_answers"]


@dataclass(frozen=True)
class Answers:
    """A student's private answers: ``sensitive`` (0 no / 1 yes), ``travel`` (0..len(TRAVEL)−1)."""

    sensitive: int
    travel: int

    def __post_init__(self) -> None:
        if self.sensitive not in (0, 1):
            raise ParameterError(f"the answer to {SENSITIVE_QUESTION!r} is 0 (no) or 1 (yes), got {self.sensitive!r}")
        if not (isinstance(self.travel, int) and 0 <= self.travel < len(TRAVEL)):
            raise ParameterError(f"the answer to {TRAVEL_QUESTION!r} is 0..{len(TRAVEL) - 1} ({', '.join(TRAVEL)}), got {self.travel!r}")


def _yes_no(text: str) -> int:
    t = text.strip().lower()
    if t in ("y", "yes", "1"):
        return 1
    if t in ("n", "no", "0"):
        return 0
    raise ParameterError(f"answer y or n, got {text.strip()!r}")


def _travel(text: str) -> int:
    """A category by its number (1..k), its name, a word of its name (``bus``, ``train``) or the
    start of one word (``walk``), case-insensitive, when exactly one category matches: the prompt
    and ``--answers`` files read answers alike."""
    t = " ".join(text.strip().lower().split())
    for j, name in enumerate(TRAVEL):
        if t == name or t == str(j + 1):
            return j
    if t:
        hits = {j for j, name in enumerate(TRAVEL) for word in name.split() if word not in ("or", "and") and word.startswith(t)}
        if len(hits) == 1:
            return hits.pop()
    raise ParameterError(f"answer 1..{len(TRAVEL)} or a name ({', '.join(f'{j + 1} {n}' for j, n in enumerate(TRAVEL))}), got {text.strip()!r}")


def ask_answers(read: Callable[[], str], write: Callable[[str], None]) -> Answers:
    """Ask both questions (again until the answer is valid; at most 5 times each)."""

    def ask(prompt: str, parse: Callable[[str], int]) -> int:
        for _ in range(5):
            write(prompt)
            line = read()
            if line == "":
                raise ParameterError("no answer (end of input)")
            try:
                return parse(line)
            except ParameterError as exc:
                write(f"  {exc}\n")
        raise ParameterError("no valid answer after 5 tries")

    write("Your answers stay on this machine. Only randomized reports leave it, and only within your budget.\n")
    sensitive = ask(f"{SENSITIVE_QUESTION} [y/n] ", _yes_no)
    menu = "  ".join(f"{j + 1} {n}" for j, n in enumerate(TRAVEL))
    travel = ask(f"{TRAVEL_QUESTION} ({menu}) ", _travel)
    return Answers(sensitive, travel)


def read_answers_file(path: str) -> Answers:
    """``--answers FILE``: JSON {"sensitive": "y"|"n"|0|1, "travel": 1..k or a name} (scripted students)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ParameterError(f"cannot read the answers file {path}: {exc}") from None
    if not isinstance(data, dict) or set(data) != {"sensitive", "travel"}:
        raise ParameterError(f"the answers file {path} holds an object with 'sensitive' and 'travel', got {str(data)[:100]!r}")
    return Answers(_yes_no(str(data["sensitive"])), _travel(str(data["travel"])))


@dataclass(frozen=True)
class StudentHoldings:
    """One seat's data, on the student's machine: the ``Holdings`` a ``Shard`` hosts.

    User ``seat·m`` (m = 1 + machine_users) holds the student's answers; the seat's other users
    hold ``sensitive = travel = 0`` (never asked) — and every user of the seat holds MASKED-PARITY
    columns generated here from ``machine`` (the class's target, a fresh secret seed).
    ``identity`` (the ledger key) is fresh per process: the ledger lasts as long as ``join``.
    """

    plan: ClassPlan
    seat: int
    answers: Answers
    machine: PopulationSpec
    identity: str = field(default_factory=lambda: hashlib.sha256(secrets.token_bytes(32)).hexdigest())

    @property
    def size(self) -> int:
        return self.plan.size

    @property
    def schema(self) -> Schema:
        return self.plan.schema

    def records(self, first_user: int, count: int) -> np.ndarray:
        lo = self.plan.student_user(self.seat)
        if first_user < lo or first_user + count > lo + self.plan.per_seat:
            raise ParameterError(f"seat {self.seat} holds users {lo}..{lo + self.plan.per_seat - 1}, not {first_user}..{first_user + count - 1}")
        out = np.zeros((count, self.schema.width), dtype=RECORD_DTYPE)
        out[:, 2:] = self.machine.records(first_user, count)
        if first_user == lo and count:
            out[0, 0], out[0, 1] = self.answers.sensitive, self.answers.travel
        return out


@dataclass(frozen=True)
class StudentConfig(ClientConfig):
    """A ``ClientConfig`` whose data is a ``StudentHoldings`` and whose shard prints each round."""

    student: StudentHoldings | None = None
    show: Callable[[RoundRequest, RoundReply, Shard], None] | None = None

    def holdings(self) -> Holdings | None:
        return self.student

    def effective_budget(self, data: Holdings) -> float:
        assert self.budget is not None
        return float(self.budget)

    def shard(self, data: Holdings, first_user: int, count: int, store: LedgerStore) -> Shard:
        """The real ``Shard``, with the terminal as its observer: a line for every round, what was
        asked, what was sent, what was charged or refused (``Shard.observer``)."""
        return Shard(
            data, first_user, count, budget=self.effective_budget(data), key=self.report_key, store=store, key_salt=self.life_salt(), observer=self.show
        )  # I1: a fresh salt per join


class Terminal:
    """What the student sees, and (``--transcript``) the same as JSON lines for tests."""

    def __init__(self, plan: ClassPlan, seat: int, answers: Answers, out: TextIO, transcript: str | None) -> None:
        self.plan, self.seat, self.answers, self.out = plan, seat, answers, out
        self.me = plan.student_user(seat)
        self.transcript = open(transcript, "a", encoding="utf-8") if transcript else None  # noqa: SIM115 - closed at exit

    def say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def __call__(self, request: RoundRequest, reply: RoundReply, shard: Shard) -> None:
        now = time.time()
        stamp = time.strftime("%H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"
        if reply.error:
            self.say(f"[{stamp}] refused the whole round {request.round} of session {request.session_id}: {reply.error}")
            self._log({"time": now, "session": request.session_id, "round": request.round, "error": reply.error})
            return
        results = {r.request_id: r for r in reply.results}
        charged = False
        for a in request.assignments:
            result = results.get(a.request_id)
            if result is None:
                continue
            spec = a.randomizer
            users = a.users.array()
            entry: dict[str, Any] = {"time": now, "session": request.session_id, "round": request.round, "request_id": a.request_id, "kind": spec.kind, "epsilon": spec.epsilon}
            if result.error:
                self.say(f"[{stamp}] refused a request: {result.error}")
                entry["error"] = result.error
                self._log(entry)
                continue
            refused = np.asarray(result.refused, dtype=bool)
            values = np.asarray(result.values)
            mine = np.flatnonzero(users == self.me)
            if mine.size:
                p = int(mine[0])
                question = question_of(spec.query)
                self.say(f"[{stamp}] asked: {question}  ({spec.kind}, ε = {spec.epsilon:g})")
                if refused[p]:
                    left = float(shard.ledger.remaining(np.array([self.me]))[0])
                    self.say(f"    REFUSED by your ledger: it asks ε = {spec.epsilon:g}, you have {left:.4g} left of your budget {shard.budget:g}. Nothing was sent.")
                    entry["student"] = {"refused": True, "left": left}
                else:
                    k = int(np.count_nonzero(~refused[:p]))
                    sent = values[k].tolist() if values.ndim > 1 else (int(values[k]) if float(values[k]).is_integer() else float(values[k]))
                    spent = float(shard.ledger.spent(np.array([self.me]))[0])
                    truth = self._truth(spec.query.to_json())
                    self.say(f"    your true answer stays here: {truth}")
                    shown = report_text(spec.kind, values[k])  # what the dashboard's chip shows, too
                    if isinstance(shown, str) and shown.startswith("bits "):  # rows of packed bits: one bit per category
                        shown += f" (one per category: {', '.join(TRAVEL)})"
                    self.say(f"    sent: {shown}    charged ε = {spec.epsilon:g}")
                    entry["student"] = {"refused": False, "sent": sent, "spent": spent}
                    charged = True
            machine = users != self.me
            if machine.any():
                asked = int(machine.sum())
                n_refused = int(refused[machine].sum())
                self.say(f"[{stamp}] your machine's generated users: {asked} asked ({spec.kind}, ε = {spec.epsilon:g} each), {asked - n_refused} reports sent, {n_refused} refused")
                entry["machine"] = {"asked": asked, "sent": asked - n_refused, "refused": n_refused}
            self._log(entry)
        if charged:
            spent = float(shard.ledger.spent(np.array([self.me]))[0])
            self.say(f"    after this round you have spent ε = {spent:.4g} of your budget {shard.budget:g}")

    def _truth(self, query: dict[str, Any]) -> str:
        text = json.dumps(query)
        if '"sensitive"' in text:
            return "yes" if self.answers.sensitive else "no"
        if '"travel"' in text:
            return TRAVEL[self.answers.travel]
        return "(generated)"

    def _log(self, entry: dict[str, Any]) -> None:
        if self.transcript is not None:
            self.transcript.write(json.dumps(entry) + "\n")
            self.transcript.flush()


@dataclass(frozen=True)
class JoinOptions:
    """``ldp-sim join``'s options, every one checked (``check_join``) before anything is asked."""

    host: str  # the dashboard's HOST:PORT
    token: str
    ca: str
    name: str
    budget: float
    connect_timeout: float


def check_join(ns: argparse.Namespace) -> JoinOptions:
    """Every option of ``join``, each refused with its name and what is allowed (one line,
    ``ParameterError``): run before the private questions are asked, so a typo in the join
    command costs the student nothing."""
    from ldp.classroom.enrol import name_problem

    if getattr(ns, "token_file", None):
        from ldp.wire.tls import read_token

        token = read_token(ns.token_file)
    elif ns.token:
        token = ns.token
    else:
        raise ParameterError("give the class's token: --token T (or --token-file F), from the join command")
    token_metadata(token)  # checks its form
    if len(ns.ca) != FINGERPRINT_HEX or any(c not in "0123456789abcdefABCDEF" for c in ns.ca):
        raise ParameterError(f"--ca is the {FINGERPRINT_HEX}-hex-digit fingerprint from the join command, got {ns.ca!r}")
    if not (math.isfinite(ns.budget) and ns.budget > 0):
        raise ParameterError(f"--budget must be a finite ε > 0, got {ns.budget}")
    timeout = float(getattr(ns, "connect_timeout", 60.0))
    if not (math.isfinite(timeout) and timeout > 0):
        raise ParameterError(f"--connect-timeout must be a finite number of seconds > 0, got {timeout}")
    host, _, port = str(ns.host).rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ParameterError(f"HOST:PORT is the dashboard's address from the join command (a port 1..65535), got {ns.host!r}")
    import getpass

    name = ns.name or getpass.getuser()
    problem = name_problem(name)
    if problem:
        raise ParameterError(f"--name {name!r}: {problem.removeprefix('name: ')}")
    return JoinOptions(str(ns.host), token, ns.ca.lower(), name, float(ns.budget), timeout)


def _get(url: str, what: str, timeout_s: float, data: bytes | None = None) -> bytes:
    """One HTTP request to the dashboard (standard library: a student process stays light), every
    socket wait bounded by ``timeout_s`` (``--connect-timeout``); a connection refused is tried
    again until then (the teacher may start a moment later). A listener that accepts and never
    answers, or no answer in time, is one line (``LDPError``) naming the address and the timeout."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {}, method="POST" if data else "GET")
        try:
            with urllib.request.urlopen(request, timeout=max(0.1, left)) as resp:
                body: bytes = resp.read(1 << 16)
                return body
        except urllib.error.HTTPError:
            raise
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, ConnectionRefusedError) and left > 0.5:
                time.sleep(0.5)
                continue
            if isinstance(exc.reason, TimeoutError):
                raise LDPError(f"the dashboard at {url.split('/')[2]} did not answer {what} within {timeout_s:g} s (--connect-timeout); giving up") from None
            raise LDPError(f"cannot reach the dashboard at {url.split('/')[2]} for {what}: {exc.reason}") from None
        except TimeoutError:
            raise LDPError(f"the dashboard at {url.split('/')[2]} did not answer {what} within {timeout_s:g} s (--connect-timeout); giving up") from None


def fetch_ca(host: str, ca: str, timeout_s: float = 20.0) -> bytes:
    """The class CA from the dashboard, checked against the join command's fingerprint: reaches
    the teacher and checks it is the teacher, before the student is asked anything."""
    import urllib.error

    try:
        ca_pem = _get(f"http://{host}/ca.pem", "the request for the class CA", timeout_s)
    except urllib.error.HTTPError as exc:
        raise ParameterError(f"the dashboard at {host} did not serve the class CA (HTTP {exc.code})") from None
    if ca_fingerprint(ca_pem) != ca.lower():
        raise ParameterError(f"the CA served by {host} does not have the fingerprint {ca} from the join command: refusing to join (is this the teacher's machine?)")
    return ca_pem


def _fetch(host: str, ca: str, token: str, name: str, secret: str, timeout_s: float = 20.0, ca_pem: bytes | None = None) -> tuple[bytes, dict[str, Any]]:
    """The class CA (checked against the fingerprint; ``ca_pem`` if already fetched) and a seat.
    The request carries the commitment to ``secret``, never the secret: only the gRPC connection
    (TLS) does, and only it can then take this seat."""
    import urllib.error

    if ca_pem is None:
        ca_pem = fetch_ca(host, ca, timeout_s)
    nonce, commit = secrets.token_hex(16), seat_commit(secret)
    body = json.dumps({"name": name, "nonce": nonce, "commit": commit, "proof": seat_proof(token, name, nonce, commit)}).encode()
    try:
        answer = json.loads(_get(f"http://{host}/seat", "the seat request", timeout_s, data=body))
    except urllib.error.HTTPError as exc:
        try:
            why = json.loads(exc.read(1 << 16)).get("error", "")
        except (ValueError, AttributeError):
            why = f"HTTP {exc.code}"
        raise ParameterError(f"the teacher gave no seat: {str(why)[:300]}") from None
    except ValueError:
        raise ParameterError("the teacher's seat answer is not JSON") from None
    if not isinstance(answer, dict):
        raise ParameterError("the teacher's seat answer is not a JSON object")
    return ca_pem, answer


async def join(ns: argparse.Namespace, answers: Answers, out: TextIO = sys.stdout, ca_pem: bytes | None = None) -> int:
    """Join with these answers: check the options, take a seat, serve it until the class ends.
    ``ca_pem``: the class CA already fetched and checked (``run_join`` fetches it before asking)."""
    opts = check_join(ns)
    secret = secrets.token_hex(32)  # this seat's secret: kept here, sent only over TLS
    ca_pem, seat_info = await asyncio.to_thread(_fetch, opts.host, opts.ca, opts.token, opts.name, secret, opts.connect_timeout, ca_pem=ca_pem)
    plan = ClassPlan.from_json(seat_info.get("plan"))
    seat, port = int(seat_info["seat"]), int(seat_info["grpc_port"])
    if not 0 <= seat < plan.seats or not 0 < port < 65536:
        raise ParameterError(f"the teacher sent an impossible seat {seat} or port {port}")
    cc = concept_class("masked_parity", plan.d)
    machine = PopulationSpec(cc, class_target(opts.token, plan.d), plan.size, budget=opts.budget, seed=secrets.randbits(63), secure=True)
    warm_up(plan.schema)  # every lesson's randomizer built (and its module imported) before the class starts
    holdings = StudentHoldings(plan, seat, answers, machine)
    terminal = Terminal(plan, seat, answers, out, ns.transcript)
    config = StudentConfig(population=machine, budget=opts.budget, student=holdings, show=terminal)
    tls = ClientTLS(grpc.ssl_channel_credentials(root_certificates=ca_pem), (*token_metadata(opts.token), (SEAT_SECRET_HEADER, secret)))
    host = opts.host.rsplit(":", 1)[0]
    terminal.say(f"joined as {opts.name!r}, seat {seat}; your budget ε = {opts.budget:g}; {plan.machine_users} MASKED-PARITY records generated here")
    # Every wait on the teacher is bounded by --connect-timeout: reaching it, and its Welcome.
    limits = ClientLimits(welcome_timeout_s=min(ClientLimits().welcome_timeout_s, opts.connect_timeout))
    code = await run_client(f"{host}:{port}", ShardClaim(seat, plan.seats), config, tls=tls, connect_timeout_s=opts.connect_timeout, limits=limits, say=terminal.say)
    return code


def run_join(ns: argparse.Namespace) -> int:
    """``ldp-sim join``: returns the exit code. The options are checked and the teacher reached
    (the class CA fetched and checked against ``--ca``) before the two private questions are
    asked: a wrong join command is said at once, not after the student has answered."""
    try:
        scripted = read_answers_file(ns.answers) if ns.answers else None  # a file is an option: checked first
        opts = check_join(ns)
        ca_pem = fetch_ca(opts.host, opts.ca, opts.connect_timeout)
        if scripted is not None:
            answers = scripted
        else:
            answers = ask_answers(sys.stdin.readline, lambda s: (sys.stdout.write(s), sys.stdout.flush()) and None)
        return asyncio.run(join(ns, answers, ca_pem=ca_pem))
    except LDPError as exc:
        print(f"ldp-sim join: {exc}", file=sys.stderr, flush=True)
        return EXIT_REJECTED
    except OSError as exc:
        print(f"ldp-sim join: cannot reach the classroom at {ns.host}: {exc}", file=sys.stderr, flush=True)
        return 1
