"""Probability-ratio queries: the SQ queries of KLNRS Lemmas 4.4 and 4.5, as a registered kind.

To simulate a local randomizer's report from statistical queries, the SQ algorithm needs
E_z[Pr[R(z) = w]] (Lemma 4.4) and, for interactive algorithms, E_z[Π_j Pr[R_j(z) = a_j]] (Lemma 4.5).
``lr_ratio`` is that query, normalized into [−1, 1] around a reference record "0". It lives in
the core (not in ``ldp.sq``) because *users* evaluate it: a local SQ oracle asks client
processes to randomize it, and clients import only the core.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ldp.core.errors import ParameterError
from ldp.core.queries import FieldReads, Query, QuerySpec, register_query
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.core.schema import RECORD_DTYPE, Schema

__all__ = ["RatioQuery", "ratio_query", "reference_record"]


def reference_record(schema: Schema) -> np.ndarray:
    """The default "0" input: every column at its field's low value."""
    return np.array([f.low for f in schema.fields for _ in range(f.length)], dtype=RECORD_DTYPE)


@register_query
class RatioQuery(Query):
    """g(z) = (r(z) − r(0)) / (r(0)(e^ε − e^{−ε})), r(z) = Π_j Pr[R_j(z) = w_j] (KLNRS Lemmas 4.4, 4.5).

    Params: ``factors``, a non-empty list of [randomizer spec (JSON), output w]; ``reference``,
    the record "0" (default: every column at its low value). ε = Σ_j ε_j, so r(z)/r(0) ∈ e^{±ε}
    and g ∈ [−1/(e^ε+1), e^ε/(e^ε+1)]: bound b = e^ε/(e^ε+1) < 1.
    """

    name = "lr_ratio"

    @classmethod
    def reads(cls, params: Mapping[str, Any]) -> FieldReads:
        """The queries of the factors' randomizer specs (JSON: ``{"kind", "query", ...}``)."""
        factors = params.get("factors")
        items = factors if isinstance(factors, (list, tuple)) else []
        return FieldReads.of(subqueries=[item[0].get("query") for item in items if isinstance(item, (list, tuple)) and item and isinstance(item[0], Mapping)])

    def __init__(self, spec: QuerySpec, schema: Schema) -> None:
        super().__init__(spec, schema)
        raw = spec.params.get("factors")
        if not isinstance(raw, (list, tuple)) or not raw:
            raise ParameterError("query 'lr_ratio' needs 'factors', a non-empty list of [randomizer spec, output]")
        self.factors: list[tuple[LocalRandomizer, float]] = []
        for item in raw:
            if not isinstance(item, (list, tuple)) or len(item) != 2:
                raise ParameterError(f"query 'lr_ratio': a factor is [randomizer spec, output], got {item!r}")
            local = LocalRandomizer.build(RandomizerSpec.from_json(item[0]), schema)
            if local.query.width != 1:
                raise ParameterError("query 'lr_ratio': factors must randomize scalar queries")
            self.factors.append((local, float(item[1])))
        ref = spec.params.get("reference")
        self.reference = reference_record(schema) if ref is None else np.asarray(ref, dtype=RECORD_DTYPE)
        schema.validate_records(self.reference[None, :])
        self.epsilon = float(sum(local.epsilon for local, _ in self.factors))
        self.log_r0 = float(self.log_r(self.reference[None, :])[0])
        if not math.isfinite(self.log_r0):
            raise ParameterError("query 'lr_ratio': the reference record gives probability 0 to the outputs")

    def log_r(self, records: np.ndarray) -> np.ndarray:
        """log r(z) = Σ_j log Pr[R_j(z) = w_j] for each record."""
        out = np.zeros(len(records))
        for local, w in self.factors:
            out += local.randomizer.log_prob(local.inputs(records), w)
        return out

    @property
    def scale(self) -> float:
        """e^ε − e^{−ε}."""
        return 2.0 * math.sinh(self.epsilon)

    @property
    def bound(self) -> float:
        return 1.0 / (1.0 + math.exp(-self.epsilon))

    def values(self) -> None:
        return None

    def evaluate(self, records: np.ndarray, users: np.ndarray | None = None) -> np.ndarray:
        ratio = np.exp(np.clip(self.log_r(records) - self.log_r0, -self.epsilon, self.epsilon))
        return (ratio - 1.0) / self.scale

    def probability(self, answer: float) -> float:
        """p̃ = r(0)(1 + v(e^ε − e^{−ε})): the estimate of E[r(z)] from an SQ answer v (clipped at 0)."""
        return max(0.0, math.exp(self.log_r0) * (1.0 + answer * self.scale))


def ratio_query(factors: list[tuple[RandomizerSpec, float]], reference: np.ndarray | None = None) -> QuerySpec:
    """Spec of an ``lr_ratio`` query over factors (R_j, w_j)."""
    params: dict[str, Any] = {"factors": [[spec.to_json(), float(w)] for spec, w in factors]}
    if reference is not None:
        params["reference"] = [int(v) for v in np.asarray(reference).ravel()]
    return QuerySpec("lr_ratio", params)
