"""The fast Walsh–Hadamard transform: the one place the project computes Fourier coefficients
over GF(2)^m (the Occam PARITY learner, the Theorem 5.1 Walsh profile, the OLH and Hadamard
Response servers)."""

from __future__ import annotations

import numpy as np

from ldp.core.errors import ParameterError

__all__ = ["walsh_hadamard"]


def walsh_hadamard(values: np.ndarray) -> np.ndarray:
    """The unnormalized Walsh–Hadamard transform along the last axis, in natural (Sylvester) order:
    out[..., r] = Σ_u values[..., u]·(−1)^{popcount(u & r)}. The length must be a power of 2.

    In-place butterflies on a copy, O(n log n); the dtype is kept, so integer counts transform
    exactly and floats stay floats. No library dependency: ``scipy.linalg.hadamard(n)`` would
    materialize the n × n matrix (2^32 entries at n = 2^16), and numpy has no WHT.

    Examples
    --------
    >>> walsh_hadamard(np.array([1, 0, 0, 0])).tolist(), walsh_hadamard(np.array([0.0, 1.0])).tolist()
    ([1, 1, 1, 1], [1.0, -1.0])
    """
    out = np.array(values, copy=True)
    n = out.shape[-1] if out.ndim else 0
    if n < 1 or n & (n - 1):
        raise ParameterError(f"walsh_hadamard: the last axis must have a power-of-2 length, got shape {out.shape}")
    lead = out.shape[:-1]
    h = 1
    while h < n:
        view = out.reshape(*lead, n // (2 * h), 2, h)  # a view: out is contiguous
        top = view[..., 0, :].copy()
        view[..., 0, :] += view[..., 1, :]
        view[..., 1, :] = top - view[..., 1, :]
        h *= 2
    return out
