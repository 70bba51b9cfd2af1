"""Parameter validation shared by the central mechanisms (precise ``ValueError`` messages)."""

from __future__ import annotations

import math

__all__ = [
    "check_epsilon",
    "check_delta",
    "check_half_open_unit",
    "check_positive_int",
    "check_bits",
]


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_epsilon(value: float, name: str = "epsilon") -> float:
    """Return ``value`` as float if it is a finite number > 0, else raise ``ValueError``."""
    if not _is_real(value) and not hasattr(value, "__float__"):
        raise ValueError(f"{name} must be a finite real number > 0; got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v <= 0.0:
        raise ValueError(f"{name} must be a finite real number > 0; got {name}={value!r}")
    return v


def check_delta(value: float, name: str = "delta") -> float:
    """Return ``value`` as float if it lies in the open interval (0, 1)."""
    if not _is_real(value) and not hasattr(value, "__float__"):
        raise ValueError(f"{name} must be a real number in (0, 1); got {value!r}")
    v = float(value)
    if not math.isfinite(v) or not 0.0 < v < 1.0:
        raise ValueError(f"{name} must lie in the open interval (0, 1); got {name}={value!r}")
    return v


def check_half_open_unit(value: float, name: str) -> float:
    """Accuracy/confidence parameters (α, β): must lie in the open interval (0, 1/2)."""
    if not _is_real(value) and not hasattr(value, "__float__"):
        raise ValueError(f"{name} must be a real number in (0, 1/2); got {value!r}")
    v = float(value)
    if not math.isfinite(v) or not 0.0 < v < 0.5:
        raise ValueError(f"{name} must lie in the open interval (0, 1/2); got {name}={value!r}")
    return v


def check_positive_int(value: int, name: str) -> int:
    """Return ``value`` if it is an integer ≥ 1."""
    if isinstance(value, bool) or not isinstance(value, (int,)) and not hasattr(value, "__index__"):
        raise ValueError(f"{name} must be an integer ≥ 1; got {value!r}")
    v = int(value)
    if v < 1:
        raise ValueError(f"{name} must be an integer ≥ 1; got {name}={value!r}")
    return v


def check_bits(value: int, name: str = "bits", max_bits: int | None = None) -> int:
    """Bit length d of the domain {0,…,2^d−1}; optionally capped (e.g. for dense algorithms)."""
    v = check_positive_int(value, name)
    if max_bits is not None and v > max_bits:
        raise ValueError(f"{name} must be ≤ {max_bits} for this (dense) implementation; got {name}={v}")
    return v
