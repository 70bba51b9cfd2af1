"""Local → SQ: an LR oracle that touches no user (KLNRS Lemmas 4.4 and 4.5).

``SQBackedLROracle`` answers every ``RoundRequest`` by *simulating* each requested report with
statistical queries to any ``SQOracle``. For a user whose earlier reports in this oracle were
a_1..a_{k−1} (from ε_1..ε_{k−1}-local randomizers R_1..R_{k−1}) and a request R_k, it samples

    w ~ p(w) = Pr_{z~Z}[R_k(z) = w | R_1(z) = a_1, ..., R_{k−1}(z) = a_{k−1}]

by rejection sampling from q = R_k(0) (0 = a fixed reference record): draw w ~ q, accept with
probability p̃(w)/(q(w)·e^{ε_k}) (valid because p(w)/q(w) ∈ e^{±ε_k}), repeat. p̃ comes from SQs:

    p(w) = E[r_1(z)]/E[r_2(z)],  r_1(z) = Pr[R_k(z)=w]·Π_j Pr[R_j(z)=a_j],  r_2(z) = Π_j Pr[R_j(z)=a_j],

each estimated with the registered query kind ``lr_ratio``
g_i(z) = (r_i(z) − r_i(0)) / (r_i(0)(e^{ε_i} − e^{−ε_i})) ∈ [−1/(e^{ε_i}+1), e^{ε_i}/(e^{ε_i}+1)],
ε_i the sum of the ε's of r_i's factors (≤ the user's budget): p̃_i = r_i(0)(1 + v_i(e^{ε_i} − e^{−ε_i})).
Without history (Lemma 4.4) r_2 ≡ 1 and only g_1 is asked.

Guarantee: with answers within τ, p̃_i is within relative δ_i = τ(e^{2ε_i} − 1) of p_i, the ratio
within δ = (δ_1+δ_2)/(1−δ_2), and each report's distribution within total-variation distance
δ/(1−δ) of the true conditional; summed over reports (hybrid argument) plus the SQ failure
probability of each step this is ``distance_bound`` (``simulation_tolerance`` inverts it).

One round = one SQ step (all (group-of-identical-histories, w) queries in one ``ask``), unless a
round names a user twice, which then takes one step per repeated layer. Randomizers need a
finite output domain (binary_rr, kary_rr, pm_rr, record_rr on small schemas); budgets are charged
to a simulated per-user ledger exactly as a shard would; sessions follow the shard's rules.
``envelope=False`` and ``condition_on_history=False`` are deliberately broken variants for tests.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from ldp.core.budget import Ledger
from ldp.core.errors import LDPError, ParameterError, require_epsilon, require_probability
from ldp.core.queries import QuerySpec
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.ratio_queries import RatioQuery, ratio_query, reference_record  # noqa: F401  (re-exported for callers)
from ldp.core.rng import generator
from ldp.core.schema import RECORD_DTYPE, Schema
from ldp.local.messages import RoundRequest, Status
from ldp.local.oracle import LROracle, Reports, ShardRange
from ldp.local.rules import SessionRules
from ldp.sq.sq_oracle import SQOracle

__all__ = [
    "SQBackedLROracle",
    "simulation_tolerance",
    "report_distance_bound",
    "MAX_REJECTION_ROUNDS",
]

MAX_REJECTION_ROUNDS = 100_000


def report_distance_bound(tolerance: float, epsilon_joint: float, epsilon_history: float = 0.0) -> float:
    """TV distance of one simulated report from the true (conditional) report distribution when
    every SQ answer is within τ: δ/(1−δ), δ = (δ_1+δ_2)/(1−δ_2), δ_i = τ(e^{2ε_i} − 1)."""
    d1 = tolerance * math.expm1(2.0 * epsilon_joint)
    d2 = tolerance * math.expm1(2.0 * epsilon_history) if epsilon_history > 0 else 0.0
    if d2 >= 1:
        return 1.0
    delta = (d1 + d2) / (1.0 - d2)
    return 1.0 if delta >= 1 else min(1.0, delta / (1.0 - delta))


def simulation_tolerance(beta: float, reports: int, epsilon: float, interactive: bool) -> float:
    """τ that keeps Σ over ``reports`` reports of ``report_distance_bound`` ≤ β, for users with
    budget ε (KLNRS Lemma 4.4: τ = Θ(β/t); Lemma 4.5: τ = Θ(β/(nt)), here with constants)."""
    beta = require_probability("β", beta)
    eps = require_epsilon(epsilon)
    if reports < 1:
        raise ParameterError(f"reports must be ≥ 1, got {reports}")
    d = beta / reports  # per-report TV
    delta = d / (1.0 + d)  # δ/(1−δ) ≤ d
    d1 = delta / (2.0 + delta) if interactive else delta  # (δ1+δ2)/(1−δ2) ≤ 2δ1/(1−δ1) ≤ δ
    tau = d1 / math.expm1(2.0 * eps)
    while report_distance_bound(tau, eps, eps if interactive else 0.0) * reports > beta:  # float guard
        tau *= 1.0 - 1e-9
    return tau


def _outputs(local: LocalRandomizer) -> np.ndarray:
    """The randomizer's finite output set (checked where a request is accepted; this only says
    so again for a report set that is not finite)."""
    outputs = local.randomizer.output_domain()
    if outputs is None:
        raise ParameterError(f"randomizer {local.spec.kind!r} has no finite output set: the SQ simulation cannot sample its reports")
    return outputs


class SQBackedLROracle(LROracle):
    """An LR oracle over ``users`` simulated users, served by SQ queries only (Lemmas 4.4, 4.5).

    Args:
        sq: any SQ oracle over the population's distribution Z (exact, local, ...).
        users: how many user ids exist.
        budget: every simulated user's ε (charged on a ledger, as a shard would).
        tolerance: τ of every SQ step (see ``simulation_tolerance``).
        confidence: 1 − β of every SQ step (added to ``distance_bound`` per step).
        seed: the simulator's own randomness (proposals and acceptances).
        reference: the record "0" (default: every column at its low value).
        envelope: False drops the e^{ε_k} in the acceptance probability (broken; for tests).
        condition_on_history: False ignores earlier reports (Lemma 4.4 misapplied; for tests).
    """

    def __init__(
        self,
        sq: SQOracle,
        users: int,
        budget: float,
        tolerance: float,
        confidence: float = 0.99,
        seed: int = 0,
        reference: np.ndarray | None = None,
        envelope: bool = True,
        condition_on_history: bool = True,
    ) -> None:
        super().__init__()
        if users < 1:
            raise ParameterError(f"users must be ≥ 1, got {users}")
        self.sq = sq
        self.schema = sq.schema
        self.count = int(users)
        self.budget = require_epsilon(budget, name="budget epsilon")
        self.tolerance = require_probability("tolerance τ", tolerance, high=float("inf"))
        self.confidence = require_probability("confidence", confidence)
        self.seed = int(seed)
        self.reference = reference_record(self.schema) if reference is None else np.asarray(reference, dtype=RECORD_DTYPE)
        self.envelope = bool(envelope)
        self.condition_on_history = bool(condition_on_history)
        self.ledger = Ledger(0, self.count, self.budget)
        self._history_id = np.zeros(self.count, dtype=np.int64)  # 0 = no report yet
        self._histories: list[tuple[tuple[str, float], ...]] = [()]
        self._history_index: dict[tuple[tuple[str, float], ...], int] = {(): 0}
        self._rules = SessionRules()
        self.reports_simulated = 0
        self.sq_steps = 0
        self.report_distance_sum = 0.0  # Σ over simulated reports of report_distance_bound

    @property
    def shards(self) -> list[ShardRange]:
        return [ShardRange("sq-simulated", 0, self.count)]

    @property
    def distance_bound(self) -> float:
        """Upper bound on the TV distance between everything simulated so far and the real thing:
        ``report_distance_sum`` + the SQ failure probability (1 − confidence) of every step."""
        return min(1.0, self.report_distance_sum + self.sq_steps * (1.0 - self.confidence))

    async def _exchange(self, sent: dict[str, RoundRequest], deadline_s: float) -> dict[str, Any]:  # pragma: no cover
        raise NotImplementedError("SQBackedLROracle answers rounds in run_round")

    async def run_round(self, request: RoundRequest) -> list[Reports]:
        refusal = self._rules.admit(request)
        results: dict[int, Reports] = {}
        pending: list[tuple[int, Any, LocalRandomizer, np.ndarray, np.ndarray]] = []
        for position, a in enumerate(request.assignments):
            users = a.users.array()
            status = np.full(len(users), Status.ERROR, dtype=np.uint8)
            try:
                if refusal:
                    raise LDPError(refusal)
                if users.size and (users.min() < 0 or users.max() >= self.count):
                    raise LDPError(f"request {a.request_id} names users outside 0..{self.count - 1}")
                local = LocalRandomizer.build(a.randomizer, self.schema)
                if local.randomizer.output_domain() is None:
                    raise LDPError(
                        f"SQBackedLROracle simulates randomizers with a finite output domain; {a.randomizer.kind!r} is continuous"
                    )
            except LDPError as exc:
                results[position] = Reports(a.request_id, a.randomizer, a.users, status, np.zeros(0), (str(exc),))
                continue
            charge = self.ledger.charge(users, local.epsilon)
            status = np.where(charge.accepted, Status.ANSWERED, Status.REFUSED).astype(np.uint8)
            pending.append((position, a, local, users, status))
        # Layers: a user named twice in one round is simulated after its first report exists.
        layers: list[list[tuple[int, Any, LocalRandomizer, np.ndarray, np.ndarray]]] = []
        seen: list[set[int]] = []
        for item in pending:
            accepted = set(item[3][item[4] == Status.ANSWERED].tolist())
            k = max((j + 1 for j in range(len(layers)) if seen[j] & accepted), default=0)
            if k == len(layers):
                layers.append([])
                seen.append(set())
            layers[k].append(item)
            seen[k] |= accepted
        for layer in layers:
            for position, reports in (await self._simulate(layer)).items():
                results[position] = reports
        return [results[k] for k in range(len(request.assignments))]

    async def _simulate(self, layer: list[tuple[int, Any, LocalRandomizer, np.ndarray, np.ndarray]]) -> dict[int, Reports]:
        """One SQ step for every (assignment, history group) of a layer, then rejection sampling."""
        queries: list[QuerySpec] = []
        plans = []  # (position, a, local, users, status, groups: [(hist_id, members, q_idx list, denominator idx)])
        for position, a, local, users, status in layer:
            answered = users[status == Status.ANSWERED]
            hist = self._history_id[answered] if self.condition_on_history else np.zeros(len(answered), dtype=np.int64)
            groups = []
            outputs = _outputs(local)
            for h in np.unique(hist):
                history = [(RandomizerSpec.from_json(json.loads(s)), w) for s, w in self._histories[int(h)]]
                numerators = []
                for w in outputs:
                    numerators.append(len(queries))
                    queries.append(ratio_query([(a.randomizer, float(w))] + history, self.reference))
                denominator = -1
                if history:
                    denominator = len(queries)
                    queries.append(ratio_query(history, self.reference))
                groups.append((int(h), answered[hist == h], numerators, denominator))
            plans.append((position, a, local, users, status, groups))
        answers = await self.sq.ask(queries, self.tolerance, self.confidence) if queries else np.zeros(0)
        if queries:
            self.sq_steps += 1
        out: dict[int, Reports] = {}
        for position, a, local, users, status, groups in plans:
            outputs = _outputs(local)
            q = np.exp(local.randomizer.log_prob(local.inputs(self.reference[None, :])[0], outputs))
            q = q / q.sum()
            rng = generator(self.seed, "sq-backed-lr", a.request_id)
            answered = users[status == Status.ANSWERED]
            values = np.empty(len(answered), dtype=np.float64)
            slot = {int(u): k for k, u in enumerate(answered.tolist())}
            spec_key = json.dumps(a.randomizer.to_json(), sort_keys=True)
            for _history, members, numerators, denominator in groups:
                p_num = np.array([_ratio(queries[i], self.schema).probability(answers[i]) for i in numerators])
                if denominator >= 0:
                    den_query = _ratio(queries[denominator], self.schema)
                    p_den = den_query.probability(answers[denominator])
                    p_tilde = p_num / p_den if p_den > 0 else q * 0 + 1.0 / len(q)
                    eps_history = den_query.epsilon
                else:
                    p_tilde, eps_history = p_num, 0.0
                envelope = math.exp(local.epsilon) if self.envelope else 1.0
                accept = np.minimum(1.0, p_tilde / (q * envelope))
                sampled = _rejection_sample(q, accept, len(members), rng)
                values[[slot[int(u)] for u in members.tolist()]] = outputs[sampled]
                self.report_distance_sum += len(members) * report_distance_bound(self.tolerance, local.epsilon + eps_history, eps_history)
                self._extend_histories(members, spec_key, outputs[sampled])
            self.reports_simulated += len(answered)
            out[position] = Reports(a.request_id, a.randomizer, a.users, status, values.astype(local.report_dtype))
        return out

    def _extend_histories(self, members: np.ndarray, spec_key: str, outputs: np.ndarray) -> None:
        for old in np.unique(self._history_id[members]):
            mask = self._history_id[members] == old
            for w in np.unique(outputs[mask]):
                key = self._histories[int(old)] + ((spec_key, float(w)),)
                new = self._history_index.get(key)
                if new is None:
                    new = len(self._histories)
                    self._histories.append(key)
                    self._history_index[key] = new
                self._history_id[members[mask & (outputs == w)]] = new


_RATIO_CACHE: dict[str, RatioQuery] = {}


def _ratio(spec: QuerySpec, schema: Schema) -> RatioQuery:
    key = json.dumps([spec.to_json(), schema.to_json()], sort_keys=True)
    cached = _RATIO_CACHE.get(key)
    if cached is None:
        if len(_RATIO_CACHE) > 4096:
            _RATIO_CACHE.clear()
        cached = _RATIO_CACHE[key] = RatioQuery(spec, schema)
    return cached


def _rejection_sample(q: np.ndarray, accept: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """Indices into the output domain: propose from q, accept index k w.p. accept[k], repeat."""
    if float(np.dot(q, accept)) <= 0:
        raise LDPError("rejection sampling cannot accept any output (every p̃(w) is 0): the SQ answers are inconsistent")
    out = np.empty(count, dtype=np.int64)
    todo = np.arange(count)
    for _ in range(MAX_REJECTION_ROUNDS):
        if not len(todo):
            return out
        proposals = rng.choice(len(q), size=len(todo), p=q)
        ok = rng.random(len(todo)) < accept[proposals]
        out[todo[ok]] = proposals[ok]
        todo = todo[~ok]
    raise LDPError(f"rejection sampling did not finish in {MAX_REJECTION_ROUNDS} rounds")
