"""The class's records, its questions, and the estimators the dashboard shows.

What: a ``ClassPlan`` fixes the public description of a class (docs/design.md §2a: what the
aggregator may know): ``seats`` seats of ``1 + machine_users`` users each. User ``K·m`` (m = 1 +
machine_users) is student K's own record — the answers they type — and users ``K·m + 1 ..``
are MASKED-PARITY records (KLNRS §5) that ``ldp-sim join`` generates on that student's machine.
Every user has the same schema: ``sensitive`` (a yes/no answer), ``travel`` (one of
``len(TRAVEL)`` categories), then the MASKED-PARITY fields ``x, i, b, y``.

The questions' wording lives here, in code both sides run: a student's terminal names the
question from the *field* a request actually reads, never from text the teacher sends.

Estimators (``Estimate``): the debiased mean of a binary question and the debiased frequencies
of a categorical one, each with a 95 % normal-approximation interval, estimate ± 1.96·sd, where sd
is the randomizer's *exact* standard deviation, never a sample one (which is 0 when every report
agrees, e.g. two identical OUE rows, and gave "95 % intervals" of width 0):

- frequencies (GRR, OUE, any frequency oracle): ``frequency_estimates`` and the exact
  ``frequency_variance`` [f p*(1 − p*) + (1 − f) q*(1 − q*)]/(n (p* − q*)²) at the realized p*, q*
  (Wang, Blocki, Li & Jha 2017; ``ldp.core.frequency_oracles``), evaluated at f = clip(f̂, 0, 1):
  the same two functions the short API uses (``ldp.experiment.estimate``);
- a yes/no question (binary RR, KLNRS's randomized response): the mean of the per-report unbiased
  estimates (``Randomizer.estimate``) and the exact variance of that mean,
  [μ·Var(1) + (1 − μ)·Var(0)]/n at μ = clip(mean, 0, 1) (``Randomizer.variance``; for binary RR
  pq/(p − q)²/n whatever μ); for a randomizer whose inputs are not {0, 1}, the largest per-report
  variance over its domain (conservative). A randomizer without ``variance`` gets no interval.

The parameters are fractions (``Estimate.bounds`` = (0, 1)), but an unbiased estimate, and its
interval, can fall outside [0, 1]: the debiasing subtracts q and divides by p − q, so a few noisy
reports can give −0.4 or 1.3. The dashboard draws the bars clipped to [0, 1] and says so.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldp.core.concepts import Concept, concept_class
from ldp.core.errors import ParameterError
from ldp.core.population import PopulationDescription
from ldp.core.queries import QuerySpec
from ldp.core.query_specs import conjunction, field_query
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec, randomizer_kinds
from ldp.core.rr_mechanisms import KaryRandomizedResponse
from ldp.core.schema import Field, Schema

__all__ = [
    "ClassPlan",
    "Estimate",
    "SENSITIVE_QUESTION",
    "TRAVEL",
    "TRAVEL_QUESTION",
    "estimate_reports",
    "class_target",
    "histogram_kind",
    "question_of",
    "report_text",
]

SENSITIVE_QUESTION = "Have you ever copied someone else's homework?"
TRAVEL_QUESTION = "How did you get here today?"
TRAVEL = ("walked", "bike", "bus or train", "car")  # k = 4: ε/k is exact in ledger units when ε is

MAX_SEATS = 1024
MAX_MACHINE_USERS = 20_000


@dataclass(frozen=True)
class ClassPlan:
    """The public shape of a class: seats, generated users per seat, the MASKED-PARITY dimension.

    Both sides build the same ``schema`` and ``description`` from it; the aggregator checks the
    description each student's client declares (``Ready``) against its own.
    """

    seats: int = 64
    # The defaults of ``ldp-sim classroom`` (--machine-users, --d): where lesson 4 shows the gap
    # for every class of 5 to 30 students (teacher.parity_lesson_size).
    machine_users: int = 1000
    d: int = 5

    def __post_init__(self) -> None:
        for name, value, low, high in (("seats", self.seats, 1, MAX_SEATS), ("machine_users", self.machine_users, 1, MAX_MACHINE_USERS), ("d", self.d, 2, 16)):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ParameterError(f"class plan: {name} must be an integer in [{low}, {high}], got {value!r}")

    @property
    def per_seat(self) -> int:
        """Users each seat holds: the student, then the machine's generated users."""
        return 1 + self.machine_users

    @property
    def size(self) -> int:
        return self.seats * self.per_seat

    @property
    def schema(self) -> Schema:
        mp = concept_class("masked_parity", self.d).schema
        return Schema((Field("sensitive", 1, 0, 1), Field("travel", 1, 0, len(TRAVEL) - 1), *mp.fields))

    def description(self) -> PopulationDescription:
        return PopulationDescription(self.size, self.schema)

    def student_user(self, seat: int) -> int:
        """The user id of seat ``seat``'s own answers."""
        return seat * self.per_seat

    def seat_of(self, user: int) -> int:
        return int(user) // self.per_seat

    def to_json(self) -> dict[str, Any]:
        return {"seats": self.seats, "machine_users": self.machine_users, "d": self.d}

    @classmethod
    def from_json(cls, data: Any) -> ClassPlan:
        if not isinstance(data, dict) or set(data) != {"seats", "machine_users", "d"}:
            raise ParameterError(f"a class plan is an object with seats, machine_users and d, got {str(data)[:200]!r}")
        return cls(data["seats"], data["machine_users"], data["d"])


def class_target(token: str, d: int) -> Concept:
    """The class's MASKED-PARITY target c_{r,a}: derived from the enrolment token, so every
    student's machine generates records of the same concept without the teacher sending it
    (the teacher, who holds the token too, computes it only to grade the learners at the end)."""
    digest = hmac.new(token.encode("ascii"), b"ldp-classroom/masked-parity-target", hashlib.sha256).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    return concept_class("masked_parity", d).random_target(rng)


def histogram_kind() -> str:
    """The randomizer the histogram lesson compares with GRR: ``oue`` when it is registered,
    else ``binary_rr`` asked once per category (see docs/classroom.md, lesson 2)."""
    return "oue" if "oue" in randomizer_kinds() else "binary_rr"


def sensitive_spec(epsilon: float) -> RandomizerSpec:
    return RandomizerSpec("binary_rr", field_query("sensitive"), epsilon)


def travel_grr_spec(epsilon: float) -> RandomizerSpec:
    return RandomizerSpec("kary_rr", field_query("travel"), epsilon)


def travel_indicator_specs(epsilon: float) -> list[RandomizerSpec]:
    """One binary RR question per category, 1[travel = j], each at ε/k: the ledger charges the
    k of them ε in all (sequential composition: it cannot know the indicators are disjoint)."""
    k = len(TRAVEL)
    return [RandomizerSpec("binary_rr", conjunction(("travel", 0, j)), epsilon / k) for j in range(k)]


def travel_oue_spec(epsilon: float) -> RandomizerSpec:
    return RandomizerSpec("oue", field_query("travel"), epsilon)


def warm_up(schema: Schema) -> None:
    """Build every randomizer the lessons ask for, once, before the class starts: the first use of
    a kind may import its module (``oue``: ``ldp.core.frequency_oracles``, which loads SciPy, about
    1 CPU-second), and 30 processes doing that at the same moment would miss a round's deadline."""
    specs = [sensitive_spec(1.0), travel_grr_spec(1.0), *travel_indicator_specs(1.0)]
    if histogram_kind() == "oue":
        specs.append(travel_oue_spec(1.0))
    for spec in specs:
        LocalRandomizer.build(spec, schema)


def question_of(query: QuerySpec) -> str:
    """What a query asks, in words, from the fields it reads (the student's terminal shows this)."""
    q = query.to_json()
    text = repr(q)
    if q["name"] == "field" and q["params"].get("field") == "sensitive":
        return SENSITIVE_QUESTION
    if q["name"] == "field" and q["params"].get("field") == "travel":
        return TRAVEL_QUESTION
    if q["name"] == "conjunction" and len(q["params"].get("literals", [])) == 1 and q["params"]["literals"][0][0] == "travel":
        value = int(q["params"]["literals"][0][2])
        if 0 <= value < len(TRAVEL):
            return f"{TRAVEL_QUESTION} — was it '{TRAVEL[value]}'?"
    if "'sensitive'" in text or "'travel'" in text:
        return f"a question about your answers: {q['name']} {q['params']}"
    return f"a MASKED-PARITY question ({q['name']})"


def report_text(kind: str, value: Any, k: int = len(TRAVEL)) -> Any:
    """One report as the student's terminal and the dashboard both show it: a row of packed bits
    (``oue``, ``sue``: one bit per category, most significant first, as ``np.packbits`` packed it)
    as ``"bits 0100"``; a number as a number (an int when it is one), anything else as a list."""
    v = np.asarray(value)
    if kind in ("oue", "sue") and v.ndim >= 1:
        bits = np.unpackbits(v.astype(np.uint8).ravel(), count=k)
        return "bits " + "".join(str(int(b)) for b in bits)
    if v.ndim:
        return v.tolist()
    return int(v) if float(v).is_integer() else float(v)


@dataclass(frozen=True)
class Estimate:
    """A debiased estimate from the reports so far: ``values[j]`` with 95 % intervals
    ``[low[j], high[j]]`` (normal approximation, exact sd: module docstring), ``labels[j]``
    naming each, ``n`` reports; ``bounds``: the range of the parameter (fractions: [0, 1]),
    which an unbiased estimate and its interval may exceed."""

    labels: tuple[str, ...]
    values: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    n: int
    sd: tuple[float, ...] = ()
    bounds: tuple[float, float] = (0.0, 1.0)

    def to_json(self) -> dict[str, Any]:
        """JSON-able; an undefined number (no interval) is null, as JSON has no NaN."""

        def clean(xs: tuple[float, ...]) -> list[float | None]:
            return [x if math.isfinite(x) else None for x in xs]

        return {
            "labels": list(self.labels), "values": clean(self.values), "low": clean(self.low), "high": clean(self.high),
            "sd": clean(self.sd), "n": self.n, "bounds": list(self.bounds),
        }


def _estimate(labels: tuple[str, ...], values: np.ndarray, sd: np.ndarray, n: int) -> Estimate:
    """values ± Z95·sd (the short API's normal quantile, ``ldp.experiment.estimate.Z95``)."""
    from ldp.experiment.estimate import Z95

    v = np.asarray(values, dtype=np.float64).ravel()
    s = np.asarray(sd, dtype=np.float64).ravel()
    return Estimate(labels, _finite(v), _finite(v - Z95 * s), _finite(v + Z95 * s), n, _finite(s))


def _mean_sd(r: Any, mean: float, n: int) -> float:
    """The exact sd of the mean of n per-report unbiased estimates (module docstring); NaN when
    the randomizer has no exact variance."""
    try:
        domain = r.input_domain()
        points = np.asarray(domain, dtype=np.float64) if isinstance(domain, np.ndarray) else np.linspace(domain.low, domain.high, 401)
        per = np.asarray(r.variance(points), dtype=np.float64)
    except (NotImplementedError, AttributeError, TypeError, ValueError):
        return math.nan
    if points.shape == (2,) and points.tolist() == [0.0, 1.0]:
        mu = min(max(mean, 0.0), 1.0)
        return math.sqrt((mu * per[1] + (1 - mu) * per[0]) / n)
    return math.sqrt(float(per.max()) / n)


def _finite(x: np.ndarray) -> tuple[float, ...]:
    return tuple(float(v) if math.isfinite(v) else float("nan") for v in np.asarray(x, dtype=np.float64).ravel())


def estimate_reports(spec: RandomizerSpec, schema: Schema, values: np.ndarray, label: str = "") -> Estimate | None:
    """The debiased estimate of what ``spec`` asked, from its reports ``values``, with its exact
    95 % interval (module docstring); None for a randomizer with no estimator here (the dashboard
    then shows the reports only)."""
    from ldp.core.frequency_oracles import frequency_estimates, frequency_variance

    local = LocalRandomizer.build(spec, schema)
    r = local.randomizer
    v = np.asarray(values)
    n = int(v.shape[0]) if v.ndim else 0
    if n == 0:
        return None
    if isinstance(r, KaryRandomizedResponse) or (hasattr(r, "frequencies") and hasattr(r, "categories")):
        f = np.asarray(frequency_estimates(r, v), dtype=np.float64)
        sd = np.sqrt(frequency_variance(r, np.clip(f, 0.0, 1.0), n))
        labels = tuple(TRAVEL[int(c)] if 0 <= int(c) < len(TRAVEL) and _reads_travel(spec) else f"{c:g}" for c in r.categories)
        return _estimate(labels, f, sd, n)
    try:
        mean = float(np.mean(np.asarray(r.estimate(v), dtype=np.float64)))
    except NotImplementedError:
        return None
    return _estimate((label or "mean",), np.array([mean]), np.array([_mean_sd(r, mean, n)]), n)


def _reads_travel(spec: RandomizerSpec) -> bool:
    return bool(spec.query.to_json()["params"].get("field") == "travel")
