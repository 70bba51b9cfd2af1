"""Errors with precise messages: what was wrong, which value, what is allowed.

User mistakes (bad parameters, unknown names, over-budget requests) raise subclasses of
``LDPError``; the CLI prints them without a traceback.
"""

from __future__ import annotations

import math

__all__ = [
    "LDPError",
    "ParameterError",
    "UnknownKindError",
    "BudgetError",
    "SessionError",
    "require_epsilon",
    "require_positive_finite",
    "require_probability",
    "require_integer",
    "require_deadline",
    "MAX_DEADLINE_S",
]


class LDPError(Exception):
    """Base class of every error ldp raises on purpose.

    User mistakes (bad parameters, unknown names, over-budget requests, broken session rules)
    raise subclasses of ``LDPError`` with precise messages (what was wrong, which value, what
    is allowed); the CLI prints them without a traceback. Catch ``LDPError`` to handle every
    deliberate refusal at once.

    Parameters
    ----------
    *args : object
        The message (one string), as for any ``Exception``.

    Examples
    --------
    >>> import ldp
    >>> try:
    ...     ldp.concept_class("parity", 0)
    ... except ldp.LDPError as exc:
    ...     print(type(exc).__name__, "-", exc)
    ParameterError - parity: d must be ≥ 1, got 0
    """


class ParameterError(LDPError, ValueError):
    """A parameter has a value outside what is allowed.

    Also a ``ValueError``, so code that catches ``ValueError`` keeps working. The message names
    the parameter, the value given and what is allowed.

    Parameters
    ----------
    *args : object
        The message (one string), as for any ``Exception``.

    Examples
    --------
    >>> import ldp
    >>> ldp.BinaryRandomizedResponse(float("inf"))
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: epsilon must be a finite number > 0, got inf
    >>> issubclass(ldp.ParameterError, ldp.LDPError), issubclass(ldp.ParameterError, ValueError)
    (True, True)
    """


class UnknownKindError(LDPError, KeyError):
    """A query, randomizer or experiment name that is not registered."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else ""


class BudgetError(LDPError):
    """A privacy-budget request that can never be honoured (e.g. ε above the allowance)."""


class SessionError(LDPError):
    """A session rule was broken (e.g. a second round in a non-interactive session)."""


# Why these limits: below 2^-30 the fixed-point ledger (2^-48 units) would round a charge up by
# more than 2^-18 relative; above 2^10 a randomizer is no longer private in any useful sense and
# exp(ε) overflows intermediate arithmetic long before ε reaches float's range.
EPSILON_MIN = 2.0**-30
EPSILON_MAX = 2.0**10


def require_positive_finite(name: str, value: object) -> float:
    """``value`` as a float if it is a finite real number > 0 (not a string or a bool), else a
    ParameterError naming it."""
    if isinstance(value, (str, bytes, bool)) or value is None:
        raise ParameterError(f"{name} must be a finite number > 0, got {value!r}")
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a finite number > 0, got {value!r}") from None
    if math.isnan(x) or math.isinf(x) or x <= 0:
        raise ParameterError(f"{name} must be a finite number > 0, got {x!r}")
    return x


def require_epsilon(value: object, name: str = "epsilon") -> float:
    """Validate a privacy parameter ε: finite, in [2^-30, 2^10] (this rejects 0, negatives,
    NaN, ±inf, subnormals and 1e308)."""
    x = require_positive_finite(name, value)
    if not EPSILON_MIN <= x <= EPSILON_MAX:
        raise ParameterError(
            f"{name} must be in [2^-30, 2^10] = [{EPSILON_MIN:.3g}, {EPSILON_MAX:g}], got {x!r}"
        )
    return x


def require_probability(name: str, value: object, *, low: float = 0.0, high: float = 1.0) -> float:
    """Validate a number strictly inside (low, high), e.g. α, β, τ."""
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a number in ({low:g}, {high:g}), got {value!r}") from None
    if not low < x < high:
        raise ParameterError(f"{name} must be in ({low:g}, {high:g}), got {x!r}")
    return x


def require_integer(name: str, value: object, low: int, high: int | None = None, allowed: str | None = None) -> int:
    """``value`` as an int if it is an integer (a Python or numpy integer, not a bool, a float or
    a string) in [low, high] (``high=None``: no upper limit), else a ParameterError naming it and
    the range (``allowed`` is how the range reads in the message, e.g. "[0, 2^64)")."""
    import numpy as np  # here, not at the top: errors is imported by everything, numpy is heavy

    bounds = f"in {allowed or f'[{low}, {high}]'}" if allowed or high is not None else f"≥ {low}"
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, (int, np.integer))
        or value < low
        or (high is not None and value > high)
    ):
        raise ParameterError(f"{name} must be an integer {bounds}, got {value!r}")
    return int(value)


# A round deadline (or a wait) longer than about 11.5 days is a typo, not a plan: the command
# line refuses it too (ldp.cli.argtypes.MAX_SECONDS).
MAX_DEADLINE_S = 1e6


def require_deadline(value: object, name: str = "deadline_s") -> float:
    """Validate a round deadline in seconds: a finite number in (0, 10^6] (this rejects 0,
    negatives, NaN, ±inf, strings and bools), wherever a round is built or decoded."""
    if isinstance(value, (str, bytes, bool)) or value is None:
        raise ParameterError(f"{name} must be a finite number of seconds in (0, 10^6], got {value!r}")
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a finite number of seconds in (0, 10^6], got {value!r}") from None
    if not (math.isfinite(x) and 0 < x <= MAX_DEADLINE_S):
        raise ParameterError(f"{name} must be a finite number of seconds in (0, 10^6], got {x!r}")
    return x
