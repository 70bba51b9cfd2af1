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
