"""What a user runs: ``RandomizerSpec`` (what the aggregator sends) and ``LocalRandomizer`` (a
registered query composed with a registered randomizer), over the complete registry of kinds.

A ``LocalRandomizer`` is what a user actually runs: a registered query composed with a
randomizer, built from a JSON-able ``RandomizerSpec`` (what the aggregator sends). Privacy holds
for the composition because the randomizer is ε-private over *all* values its input can take and
``check_inputs`` enforces that domain before anything is charged: a finite randomizer refuses a
value that is not one of its categories, a bounded-interval randomizer clips to [−b, b], and
NaN/±inf are refused everywhere. ``LocalRandomizer.inputs(records)`` (evaluate + check, may
raise) and ``LocalRandomizer.sample(inputs, randomness)`` (never raises on checked inputs) are
separate so a client checks every user's input *before* charging, then samples the accepted ones.

What a randomizer is, and the exact integer arithmetic of its sampler, is in
``ldp.core.randomizer_base``; each mechanism family is a module of its own that registers its
kinds there with ``@register_randomizer``. This module imports every family, so the registry it
reads is complete (tests/core/test_randomizers.py checks the list below against it).

Kinds:
- ``binary_rr``          randomized response on a {0,1}-valued query (Warner 1965). ``ldp.core.rr_mechanisms``
- ``kary_rr``            k-ary generalized randomized response over a query's finite values. ``ldp.core.rr_mechanisms``
- ``record_rr``          every column of the record through k-ary RR with ε/width each (KLNRS Claim 2.1). ``ldp.core.rr_mechanisms``
- ``discrete_laplace``   KLNRS Claim 4.1 on a public grid, exact on integer cells. ``ldp.core.laplace``
- ``laplace``            g(u) + Lap(2b/ε) in floats (Claim 4.1 as printed): **not auditable, not
                         requestable by users** (Mironov 2012); in process only. ``ldp.core.laplace``
- ``pm_rr``              ±b randomized response (Duchi, Jordan & Wainwright 2013). ``ldp.core.plus_minus``
- ``oue``                optimized unary encoding (Wang et al. 2017). ``ldp.core.frequency_oracles``
- ``sue``                symmetric unary encoding, basic RAPPOR (Erlingsson et al. 2014). ``ldp.core.frequency_oracles``
- ``olh``                optimized local hashing (Wang et al. 2017). ``ldp.core.frequency_oracles``
- ``hadamard_response``  Hadamard Response (Acharya, Sun & Zhang 2019). ``ldp.core.frequency_oracles``
- ``subset_selection``   Subset Selection (Wang, Wu & Hu 2016; Ye & Barg 2018). ``ldp.core.frequency_oracles``
- ``adaptive_fo``        k-ary RR or OLH/OUE, whichever has the smaller variance. ``ldp.core.frequency_oracles``
- ``piecewise``          the Piecewise mechanism for a mean (Wang et al. 2019). ``ldp.core.mean_estimation``
- ``hybrid``             Piecewise or ±b RR by a coin (Wang et al. 2019). ``ldp.core.mean_estimation``
- ``spl``                every column of the record (an attribute) through GRR, OUE or SUE at ε/d (Arcolezi et al. 2021). ``ldp.core.multidimensional``
- ``smp``                one attribute of the record, drawn by the user and disclosed, at ε (Wang et al. 2019). ``ldp.core.multidimensional``
- ``rsfd``               one hidden attribute at ε, fake data for the others (Arcolezi et al. 2021). ``ldp.core.multidimensional``
- ``cms``                Apple's Count Mean Sketch (Apple DP Team 2017). ``ldp.core.sketches``
- ``hcms``               Apple's Hadamard Count Mean Sketch (Apple DP Team 2017). ``ldp.core.sketches``
- ``cms_string``         Apple's Count Mean Sketch over an open domain of strings, by 64-bit fingerprint (Apple DP Team 2017). ``ldp.core.sketches``
- ``hcms_string``        Apple's Hadamard Count Mean Sketch over an open domain of strings, by 64-bit fingerprint (Apple DP Team 2017). ``ldp.core.sketches``
- ``treehist_prefix``    TreeHist's one-round report: the user's own level and OLH of its prefix of that length (Bassily et al. 2017). ``ldp.core.prefix_reports``
- ``l_grr``              longitudinal k-ary RR: a memoized permanent response at ε∞, a fresh one per report at ε1 (Arcolezi et al. 2022). ``ldp.core.longitudinal``
- ``l_oue``              longitudinal OUE, memoized (Arcolezi et al. 2022). ``ldp.core.longitudinal``
- ``l_osue``             longitudinal OUE then SUE, memoized (Arcolezi et al. 2022). ``ldp.core.longitudinal``
- ``l_sue``              basic RAPPOR's permanent and instantaneous responses (Erlingsson et al. 2014). ``ldp.core.longitudinal``
- ``l_adp``              L-GRR or L-OSUE, whichever has the smaller approximate variance at (k, ε∞, ε1) (Arcolezi et al. 2022). ``ldp.core.longitudinal``
- ``rappor``             full RAPPOR: Bloom filters, cohorts, a memoized PRR at ε∞ and a fresh IRR per report (Erlingsson et al. 2014). ``ldp.core.rappor``
- ``dbitflip_pm``        dBitFlipPM: d sampled buckets, one bit each, memoized (Ding et al. 2017). ``ldp.core.telemetry``
- ``alpha_one_bit_mean`` 1BitMean with α-point rounding, memoized (Ding et al. 2017). ``ldp.core.telemetry``
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

# Every mechanism family, imported for its registrations: the one place that lists them.
from ldp.core import (  # noqa: F401
    frequency_oracles,
    laplace,
    longitudinal,
    mean_estimation,
    multidimensional,
    plus_minus,
    prefix_reports,
    rappor,
    rr_mechanisms,
    sketches,
    telemetry,
)
from ldp.core.errors import ParameterError, UnknownKindError, require_epsilon
from ldp.core.queries import Query, QuerySpec, make_query
from ldp.core.randomizer_base import Randomizer, check_params, registered_randomizers
from ldp.core.rng import Draws
from ldp.core.schema import Schema

__all__ = ["RandomizerSpec", "LocalRandomizer", "randomizer_kinds", "randomizer_params"]


# --- specs: what travels on the wire, and how a user builds what it runs ---


@dataclass(frozen=True)
class RandomizerSpec:
    """A randomizer by kind, query and ε; JSON-able: what the aggregator sends the users.

    The *client* derives the ε it charges from this spec through the randomizer it builds,
    never from a separate field. Construction refuses what no user would run (see Raises); the
    users' side checks everything again (``LocalRandomizer.build``): this is for the
    aggregator's programmer, not a privacy guarantee.

    Parameters
    ----------
    kind : str
        A registered randomizer kind (``randomizer_kinds()``, listed in this module's docstring),
        e.g. ``"binary_rr"`` or ``"discrete_laplace"``; ``"laplace"`` is not requestable by users
        (in-process paper-fidelity demonstrations only).
    query : QuerySpec
        The query g whose value the randomizer takes, e.g. ``field_query("x", 0)``.
    epsilon : float
        ε, a finite real in [2^-30, 2^10] (``require_epsilon``); stored as a float.
    params : mapping, default {}
        Kind-specific parameters, e.g. ``{"steps": 16}`` for ``discrete_laplace``.

    Raises
    ------
    UnknownKindError
        An unregistered kind (the message lists the kinds).
    ParameterError
        A kind that is not a string, a query that is not a ``QuerySpec``, an invalid ε, or
        params that are not a mapping.

    Examples
    --------
    >>> import ldp
    >>> spec = ldp.RandomizerSpec("binary_rr", ldp.field_query("x", 0), epsilon=1)
    >>> spec.epsilon, spec.to_json()["query"]
    (1.0, {'name': 'field', 'params': {'field': 'x', 'index': 0}})
    >>> ldp.RandomizerSpec.from_json(spec.to_json()) == spec
    True
    >>> ldp.RandomizerSpec("binary_rr", ldp.field_query("x", 0), epsilon=0)
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: randomizer 'binary_rr': epsilon must be a finite number > 0, got 0.0
    >>> ldp.RandomizerSpec("gaussian", ldp.field_query("x", 0), epsilon=1)
    Traceback (most recent call last):
    ...
    ldp.core.errors.UnknownKindError: unknown randomizer kind 'gaussian'; registered kinds are [...]
    """

    kind: str
    query: QuerySpec
    epsilon: float
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Refuse at construction what no user would run: an unregistered kind (UnknownKindError
        listing the kinds), a query that is not a ``QuerySpec``, an ε that is not a finite real in
        [2^-30, 2^10] (``require_epsilon``; stored as a float), params that are not a mapping.
        The users' side checks everything again (``LocalRandomizer.build``): this is for the
        aggregator's programmer, not a privacy guarantee."""
        if not isinstance(self.kind, str):
            raise ParameterError(f"randomizer kind must be a string (one of {randomizer_kinds()}), got {self.kind!r}")
        if self.kind not in registered_randomizers():
            raise UnknownKindError(f"unknown randomizer kind {self.kind!r}; registered kinds are {randomizer_kinds()}")
        if not isinstance(self.query, QuerySpec):
            raise ParameterError(
                f"randomizer {self.kind!r}: query must be a QuerySpec (e.g. field_query('x', 0)), got {type(self.query).__name__} {self.query!r}"
            )
        if isinstance(self.epsilon, (bool, str, bytes)) or not isinstance(self.epsilon, (int, float, np.integer, np.floating, Fraction, Decimal)):
            raise ParameterError(f"randomizer {self.kind!r}: epsilon must be a finite real number in [2^-30, 2^10], got {self.epsilon!r}")
        object.__setattr__(self, "epsilon", require_epsilon(self.epsilon, name=f"randomizer {self.kind!r}: epsilon"))
        check_params(self.kind, self.params)  # early, for the programmer; build checks again

    @classmethod
    def unchecked(cls, kind: Any, query: Any, epsilon: Any, params: Any = None) -> RandomizerSpec:
        """A spec built *without* the construction checks: what the wire codec decodes (an
        aggregator's request, validated by the users' side when ``LocalRandomizer.build`` builds
        it) and what tests send to prove that the users' side refuses what a hostile or buggy
        aggregator could send. Never use it to get around a check anywhere else."""
        spec = object.__new__(cls)
        for name, value in (("kind", kind), ("query", query), ("epsilon", epsilon), ("params", {} if params is None else params)):
            object.__setattr__(spec, name, value)
        return spec

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "query": self.query.to_json(), "epsilon": self.epsilon, "params": dict(self.params)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RandomizerSpec:
        """The spec ``to_json`` wrote: keys ``kind``, ``query``, ``epsilon`` and optionally
        ``params``. A value that is not a JSON object, an unknown key or a missing key is a
        one-line ParameterError naming it (issue 23, I6), not a builtin error's text."""
        if not isinstance(data, Mapping):
            raise ParameterError(f"malformed randomizer spec: expected a JSON object with keys {list(_SPEC_KEYS)}, got {type(data).__name__} {data!r}"[:300])
        unknown = sorted(str(k) for k in data if k not in _SPEC_KEYS)
        if unknown:
            raise ParameterError(f"malformed randomizer spec: unknown keys {unknown} (a spec has {list(_SPEC_KEYS)})")
        missing = [k for k in _SPEC_KEYS[:3] if k not in data]
        if missing:
            raise ParameterError(f"malformed randomizer spec: no {missing[0]!r} key (a spec needs {list(_SPEC_KEYS[:3])})")
        epsilon, params = data["epsilon"], data.get("params", {})
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)):
            raise ParameterError(f"randomizer spec key 'epsilon' must be a number, got {epsilon!r}"[:300])
        if not isinstance(params, Mapping):
            raise ParameterError(f"randomizer spec key 'params' must be a JSON object, got {params!r}"[:300])
        try:
            query = QuerySpec.from_json(data["query"])
        except ParameterError as exc:
            raise ParameterError(f"randomizer spec key 'query': {exc}") from None
        return cls(data["kind"], query, epsilon, dict(params))  # the constructor names a bad kind or ε


_SPEC_KEYS = ("kind", "query", "epsilon", "params")  # what RandomizerSpec.to_json writes


def randomizer_params(kind: str) -> frozenset[str]:
    """The names of the ``params`` a registered randomizer kind accepts (every other is refused)."""
    try:
        return registered_randomizers()[kind].params
    except KeyError:
        raise UnknownKindError(f"unknown randomizer kind {kind!r}; registered kinds are {randomizer_kinds()}") from None


def randomizer_kinds() -> list[str]:
    """The registered randomizer kinds, sorted: the names a ``RandomizerSpec`` may use.

    ``laplace`` is listed but not requestable by users (``LocalRandomizer.build`` refuses it
    unless ``allow_unaudited=True``: its float outputs are open to Mironov's attack).

    Returns
    -------
    list of str
        The kinds, in alphabetical order.

    Examples
    --------
    >>> import ldp
    >>> ldp.randomizer_kinds()
    ['adaptive_fo', 'alpha_one_bit_mean', 'binary_rr', 'cms', 'cms_string', 'dbitflip_pm', 'discrete_laplace', 'hadamard_response', 'hcms', 'hcms_string', 'hybrid', 'kary_rr', 'l_adp', 'l_grr', 'l_osue', 'l_oue', 'l_sue', 'laplace', 'olh', 'oue', 'piecewise', 'pm_rr', 'rappor', 'record_rr', 'rsfd', 'smp', 'spl', 'subset_selection', 'sue', 'treehist_prefix']
    """
    return sorted(registered_randomizers())


@dataclass(frozen=True)
class LocalRandomizer:
    """R = randomizer ∘ query: the ε-local randomizer a user runs on its own record.

    Built and validated on the user's side from a ``RandomizerSpec``; ``epsilon`` is the
    randomizer's declared ε, which is what the user's ledger charges. Use it in two steps so
    nothing is charged for a report that cannot be made: ``inputs(records)`` evaluates the query
    and checks every value (may raise ParameterError), then, after charging the users whose
    inputs were accepted, ``sample(inputs, randomness)`` (never raises on checked inputs).
    Privacy holds for the composition because the randomizer is ε-private over *all* values its
    input can take and ``check_inputs`` enforces that domain before anything is charged.

    Parameters
    ----------
    spec : RandomizerSpec
        The spec it was built from.
    query : Query
        The validated query, bound to the users' schema.
    randomizer : Randomizer
        The validated randomizer.

    Examples
    --------
    Build one with ``LocalRandomizer.build`` (not the constructor, which checks nothing):

    >>> import ldp
    >>> schema = ldp.concept_class("parity", 3).schema
    >>> local = ldp.LocalRandomizer.build(ldp.RandomizerSpec("kary_rr", ldp.parity([0, 1]), 1.0), schema)
    >>> local.randomizer, local.epsilon, local.report_width
    (KaryRandomizedResponse(epsilon=1.0, categories=(-1.0, 1.0)), 1.0, 1)
    """

    spec: RandomizerSpec
    query: Query
    randomizer: Randomizer

    @classmethod
    def build(cls, spec: RandomizerSpec, schema: Schema, *, allow_unaudited: bool = False) -> LocalRandomizer:
        """Validate a spec against a schema and build what the user runs.

        Refuses (ParameterError): a kind whose sampler is not auditable (float ``laplace``)
        unless ``allow_unaudited`` (in-process paper-fidelity demonstrations only — never for
        requests from an aggregator); a query whose width is not the randomizer's input width;
        a finite query with values outside a finite randomizer's domain. Everything in the spec
        is checked again here (ε, the kind, the query against the schema), so a spec decoded
        from the wire without checks is refused just the same.

        Parameters
        ----------
        spec : RandomizerSpec
            The randomizer kind, query and ε.
        schema : Schema
            The users' record schema (the query is validated against it).
        allow_unaudited : bool, default False
            Accept a kind whose sampler is not auditable (float ``laplace``).

        Returns
        -------
        LocalRandomizer
            The validated composition; its ``epsilon`` is what a charge costs.

        Raises
        ------
        ParameterError
            An invalid ε, query or parameters, or any refusal above.
        UnknownKindError
            An unregistered randomizer or query kind.

        Examples
        --------
        >>> import ldp
        >>> schema = ldp.concept_class("parity", 3).schema
        >>> ldp.LocalRandomizer.build(ldp.RandomizerSpec("binary_rr", ldp.label_query(), 0.5), schema).epsilon
        0.5
        >>> ldp.LocalRandomizer.build(ldp.RandomizerSpec("binary_rr", ldp.parity([0]), 1.0), schema)
        Traceback (most recent call last):
        ...
        ldp.core.errors.ParameterError: binary_rr needs a {0,1}-valued query; 'parity' takes values [-1.0, 1.0]
        >>> ldp.LocalRandomizer.build(ldp.RandomizerSpec("laplace", ldp.label_query(), 1.0), schema)
        Traceback (most recent call last):
        ...
        ldp.core.errors.ParameterError: randomizer 'laplace' is not auditable: ... request 'discrete_laplace'
        """
        epsilon = require_epsilon(spec.epsilon)
        try:
            registered = registered_randomizers()[spec.kind]
        except (KeyError, TypeError):  # TypeError: an unhashable kind decoded from the wire
            raise UnknownKindError(f"unknown randomizer kind {spec.kind!r}; registered kinds are {randomizer_kinds()}") from None
        check_params(spec.kind, spec.params)  # every kind, before its builder runs: none reads an undeclared name
        if not registered.requestable and not allow_unaudited:
            raise ParameterError(
                f"randomizer {spec.kind!r} is not auditable: float Laplace is kept in process for paper fidelity "
                "(open to Mironov's attack); request 'discrete_laplace'"
            )
        query = make_query(spec.query, schema)
        if not registered.record_input and query.width != 1:
            raise ParameterError(f"randomizer {spec.kind!r} takes scalar inputs (width 1); query {spec.query.name!r} has width {query.width}")
        spec = RandomizerSpec(spec.kind, spec.query, epsilon, spec.params)
        randomizer = registered.build(spec, query)
        if not randomizer.auditable and not allow_unaudited:  # a subclass registered later
            raise ParameterError(f"randomizer {spec.kind!r} is not auditable; it can only run in process with allow_unaudited=True")
        if randomizer.input_width != query.width:
            raise ParameterError(
                f"randomizer {spec.kind!r} takes inputs of width {randomizer.input_width}; query {spec.query.name!r} has width {query.width}"
            )
        values = query.values() if randomizer.input_width == 1 else None
        domain = randomizer.input_domain() if values is not None else None
        if values is not None and isinstance(domain, np.ndarray):
            outside = values[~np.isin(values, domain)]
            if outside.size:
                raise ParameterError(f"randomizer {spec.kind!r}: query {spec.query.name!r} can take {outside[0]!r}, which is not in its domain {domain.tolist()[:8]}")
        return cls(spec, query, randomizer)

    @property
    def epsilon(self) -> float:
        return self.randomizer.epsilon

    @property
    def report_dtype(self) -> type[np.generic]:
        return self.randomizer.report_dtype

    @property
    def report_width(self) -> int:
        return self.query.width

    def inputs(self, records: np.ndarray, users: np.ndarray | None = None) -> np.ndarray:
        """The randomizer's inputs g(z_i), checked by ``randomizer.check_inputs``.

        A bad value is a ParameterError naming it; bounded inputs are clipped to [−b, b]:
        privacy must not depend on the query keeping its word. Call it for all users *before*
        charging any.

        Parameters
        ----------
        records : numpy.ndarray
            The users' records, shape (n, schema.width).
        users : numpy.ndarray, optional
            The rows' user ids (a per-user family such as ``user_parity`` needs them).

        Returns
        -------
        numpy.ndarray
            The checked inputs, one per row (rows of the record width for ``record_rr``).

        Raises
        ------
        ParameterError
            A value outside the randomizer's domain, NaN or ±inf, or missing user ids for a
            per-user family.

        Examples
        --------
        >>> import ldp, numpy as np
        >>> schema = ldp.concept_class("parity", 3).schema
        >>> local = ldp.LocalRandomizer.build(ldp.RandomizerSpec("kary_rr", ldp.parity([0, 1]), 1.0), schema)
        >>> local.inputs(np.array([[1, 0, 1, 0], [0, 0, 1, 1]], dtype=np.int16)).tolist()
        [-1.0, 1.0]
        """
        return self.randomizer.check_inputs(self.query.evaluate(records, users))

    def sample(self, inputs: np.ndarray, randomness: Draws) -> np.ndarray:
        """Each user's report from its checked input (``inputs``); does not raise on those.

        Parameters
        ----------
        inputs : numpy.ndarray
            Checked inputs, from ``inputs``.
        randomness : Draws
            The users' draws (``UserRandomness``: one per user, in the rows' order).

        Returns
        -------
        numpy.ndarray
            One report per user, of the randomizer's report dtype.

        Examples
        --------
        >>> import ldp, numpy as np
        >>> from ldp.core.rng import RandomSource
        >>> schema = ldp.concept_class("parity", 3).schema
        >>> local = ldp.LocalRandomizer.build(ldp.RandomizerSpec("binary_rr", ldp.label_query(), 1.0), schema)
        >>> randomness = RandomSource(0).for_request("demo", 0, np.arange(3))
        >>> reports = local.sample(local.inputs(np.array([[0, 0, 0, 1]] * 3, dtype=np.int16)), randomness)
        >>> reports.dtype, set(reports.tolist()) <= {0, 1}
        (dtype('uint8'), True)
        """
        return self.randomizer.sample(inputs, randomness).astype(self.report_dtype, copy=False)

    def apply(self, records: np.ndarray, randomness: Draws) -> np.ndarray:
        """Each user's report: R(z_i) for every row of ``records`` (``inputs`` then ``sample``).

        The rows belong to ``randomness.users``. Nothing is charged here: a client charges
        between ``inputs`` and ``sample``.

        Parameters
        ----------
        records : numpy.ndarray
            The users' records, shape (n, schema.width).
        randomness : Draws
            The users' draws; ``randomness.users`` are the rows' user ids.

        Returns
        -------
        numpy.ndarray
            One report per row.

        Raises
        ------
        ParameterError
            A query value outside the randomizer's domain (``inputs``).

        Examples
        --------
        >>> import ldp, numpy as np
        >>> from ldp.core.rng import RandomSource
        >>> schema = ldp.concept_class("parity", 3).schema
        >>> local = ldp.LocalRandomizer.build(ldp.RandomizerSpec("kary_rr", ldp.parity([0, 1]), 1.0), schema)
        >>> records = np.array([[1, 0, 1, 0], [0, 0, 1, 1]], dtype=np.int16)
        >>> randomness = RandomSource(0).for_request("demo", 0, np.arange(2))
        >>> bool((local.apply(records, randomness) == local.sample(local.inputs(records), randomness)).all())
        True
        """
        return self.sample(self.inputs(records, np.asarray(randomness.users, dtype=np.int64)), randomness)
