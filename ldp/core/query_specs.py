"""Query spec builders: the one way to write queries in code (``field_query``, ``parity``, ...).

Each returns the ``QuerySpec`` of a registered kind of ``ldp.core.queries``. They check what
needs no schema (types, identifier names, integer indices ≥ 0) and raise a ParameterError naming
the value; a field a schema lacks is refused by ``Session.round`` (against the oracle's
description, from what the kind declares it reads: ``Query.reads``) and by the users.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ldp.core.errors import ParameterError
from ldp.core.queries import MAX_FINITE_VALUES, QuerySpec

__all__ = ["field_query", "label_query", "conjunction", "parity", "bent", "user_parity", "product", "affine", "record_query", "prefix_index"]


def _identifier(what: str, value: Any) -> str:
    if not isinstance(value, str) or not value.isidentifier():
        raise ParameterError(f"{what} must be a field name (an identifier such as 'x' or 'y'), got {value!r}")
    return value


def _index(what: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ParameterError(f"{what} must be an integer ≥ 0, got {value!r}")
    return int(value)


def _integer(what: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ParameterError(f"{what} must be an integer, got {value!r}")
    return int(value)


def _finite(what: str, value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) or not math.isfinite(value):
        raise ParameterError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def _spec(what: str, value: Any) -> QuerySpec:
    if not isinstance(value, QuerySpec):
        raise ParameterError(f"{what} must be a QuerySpec (e.g. field_query('x', 0)), got {type(value).__name__} {value!r}")
    return value


def field_query(name: str, index: int = 0) -> QuerySpec:
    """g(z) = ``z[field][index]``: one column of a field, e.g. bit j of x (kind ``"field"``).

    Its bound b is max(|low|, |high|) of the field and its values are the field's values.

    A builder checks what needs no schema (types, identifier names, integer indices ≥ 0) and
    raises a ParameterError naming the value; a field a schema lacks is refused by
    ``Session.round`` (against the oracle's description) and by the users.

    Parameters
    ----------
    name : str
        The field's name (an identifier), e.g. ``"x"``.
    index : int, default 0
        Which column of the field, ≥ 0.

    Returns
    -------
    QuerySpec
        ``QuerySpec("field", {"field": name, "index": index})``.

    Raises
    ------
    ParameterError
        ``name`` is not an identifier or ``index`` is not an integer ≥ 0.

    Examples
    --------
    >>> import ldp, numpy as np
    >>> from ldp.core.queries import make_query
    >>> spec = ldp.field_query("x", 2)
    >>> spec
    QuerySpec(name='field', params={'field': 'x', 'index': 2})
    >>> records = np.array([[1, 0, 1, 0], [0, 1, 0, 1]], dtype=np.int16)  # (x0, x1, x2, y)
    >>> make_query(spec, ldp.concept_class("parity", 3).schema).evaluate(records).tolist()
    [1.0, 0.0]
    >>> ldp.field_query("x", -1)
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: field_query('x'): index must be an integer ≥ 0, got -1
    """
    return QuerySpec("field", {"field": _identifier("field_query: field", name), "index": _index(f"field_query({name!r}): index", index)})


def label_query(name: str = "y") -> QuerySpec:
    """g(z) = the label: the (first) column of the label field (kind ``"label"``).

    A builder checks what needs no schema (types, identifier names, integer indices ≥ 0) and
    raises a ParameterError naming the value; a field a schema lacks is refused by
    ``Session.round`` (against the oracle's description) and by the users.

    Parameters
    ----------
    name : str, default "y"
        The label field's name (an identifier).

    Returns
    -------
    QuerySpec
        ``QuerySpec("label", {"field": name})``.

    Raises
    ------
    ParameterError
        ``name`` is not an identifier.

    Examples
    --------
    >>> import ldp, numpy as np
    >>> from ldp.core.queries import make_query
    >>> records = np.array([[1, 0, 1, 0], [0, 1, 0, 1]], dtype=np.int16)  # (x0, x1, x2, y)
    >>> make_query(ldp.label_query(), ldp.concept_class("parity", 3).schema).evaluate(records).tolist()
    [0.0, 1.0]
    """
    return QuerySpec("label", {"field": _identifier("label_query: field", name)})


def conjunction(*literals: tuple[str, int, int] | tuple[str, int, int, bool]) -> QuerySpec:
    """g(z) = 1 if every literal holds else 0 (kind ``"conjunction"``, values {0, 1}, bound 1).

    A literal (field, index, value, equal) tests ``z[field][index] == value`` (or ``!=`` when
    equal is false). The users' side also refuses a value the field cannot take.

    A builder checks what needs no schema (types, identifier names, integer indices ≥ 0) and
    raises a ParameterError naming the value; a field a schema lacks is refused by
    ``Session.round`` (against the oracle's description) and by the users.

    Parameters
    ----------
    *literals : tuple
        One or more ``(field, index, value)`` or ``(field, index, value, equal)``: field an
        identifier, index an integer ≥ 0, value an integer, equal a bool (default True).

    Returns
    -------
    QuerySpec
        ``QuerySpec("conjunction", {"literals": [[field, index, value(, equal)], ...]})``.

    Raises
    ------
    ParameterError
        No literal, or a literal of the wrong shape or types.

    Examples
    --------
    >>> import ldp, numpy as np
    >>> from ldp.core.queries import make_query
    >>> spec = ldp.conjunction(("x", 0, 1), ("x", 1, 0, False))  # x0 = 1 and x1 ≠ 0
    >>> records = np.array([[1, 0, 1, 0], [1, 1, 0, 1]], dtype=np.int16)
    >>> make_query(spec, ldp.concept_class("parity", 3).schema).evaluate(records).tolist()
    [0.0, 1.0]
    >>> ldp.conjunction()
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: conjunction needs at least one literal (field, index, value[, equal])
    """
    if not literals:
        raise ParameterError("conjunction needs at least one literal (field, index, value[, equal])")
    out = []
    for k, lit in enumerate(literals):
        if not isinstance(lit, (list, tuple)) or len(lit) not in (3, 4):
            raise ParameterError(f"conjunction: literal {k} must be (field, index, value) or (field, index, value, equal), got {lit!r}")
        item: list[Any] = [
            _identifier(f"conjunction: literal {k} field", lit[0]),
            _index(f"conjunction: literal {k} index", lit[1]),
            _integer(f"conjunction: literal {k} value", lit[2]),
        ]
        if len(lit) == 4:
            if not isinstance(lit[3], (bool, np.bool_)):
                raise ParameterError(f"conjunction: literal {k} equal must be True or False, got {lit[3]!r}")
            item.append(bool(lit[3]))
        out.append(item)
    return QuerySpec("conjunction", {"literals": out})


def parity(mask: Sequence[int] | np.ndarray, field: str = "x", output: str = "sign") -> QuerySpec:
    """(−1)^⟨m, x⟩ (or the bit ⟨m, x⟩ with ``output="bit"``) over the bits of a field named by ``mask``.

    ``mask`` is a list of indices into the field, or a bool vector over it.

    Kind ``"parity"``: values {−1, +1} (or {0, 1}), bound 1; an empty mask is the constant 1.

    A builder checks what needs no schema (types, identifier names, integer indices ≥ 0) and
    raises a ParameterError naming the value; a field a schema lacks is refused by
    ``Session.round`` (against the oracle's description) and by the users.

    Parameters
    ----------
    mask : sequence of int or numpy.ndarray
        Distinct indices ≥ 0 into the field, or a one-dimensional bool vector over it.
    field : str, default "x"
        The field the parity is over.
    output : {"sign", "bit"}, default "sign"
        ``"sign"``: (−1)^⟨m, x⟩ ∈ {−1, +1}; ``"bit"``: ⟨m, x⟩ mod 2 ∈ {0, 1}.

    Returns
    -------
    QuerySpec
        ``QuerySpec("parity", {"field": field, "mask": [indices], "output": output})``.

    Raises
    ------
    ParameterError
        A mask that is not 1-d, has negative or repeated indices or non-integer entries; an
        unknown ``output``; a ``field`` that is not an identifier.

    Examples
    --------
    >>> import ldp, numpy as np
    >>> from ldp.core.queries import make_query
    >>> schema = ldp.concept_class("parity", 3).schema
    >>> records = np.array([[1, 0, 1, 0], [1, 1, 0, 1]], dtype=np.int16)
    >>> make_query(ldp.parity([0, 2]), schema).evaluate(records).tolist()
    [1.0, -1.0]
    >>> ldp.parity(np.array([True, False, True]), output="bit") == ldp.parity([0, 2], output="bit")
    True
    >>> ldp.parity([1, 1])
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: parity: mask indices must be distinct, got [1, 1]
    """
    if isinstance(mask, (str, bytes)):
        raise ParameterError(f"parity: mask must be a list of indices ≥ 0 or a bool vector, got {mask!r}")
    m = np.asarray(mask)
    if m.ndim != 1:
        raise ParameterError(f"parity: mask must be one-dimensional (a list of indices or a bool vector), got shape {m.shape}")
    if m.dtype == bool:
        indices = np.flatnonzero(m).tolist()
    elif m.size == 0:
        indices = []
    elif m.dtype.kind in "iu":
        indices = [int(j) for j in m]
        if min(indices) < 0:
            raise ParameterError(f"parity: mask indices must be ≥ 0, got {min(indices)}")
        if len(set(indices)) != len(indices):
            raise ParameterError(f"parity: mask indices must be distinct, got {indices[:16]}")
    else:
        raise ParameterError(f"parity: mask must be a list of integer indices ≥ 0 or a bool vector, got {mask!r}")
    if output not in ("sign", "bit"):
        raise ParameterError(f"parity: output must be 'sign' or 'bit', got {output!r}")
    return QuerySpec("parity", {"field": _identifier("parity: field", field), "mask": indices, "output": output})


def bent(field: str = "x", output: str = "sign") -> QuerySpec:
    """(−1)^{Σ_k x_k x_{k+L/2}} over a {0,1} field of even length L (every Walsh coefficient ±2^{−L/2}).

    Kind ``"bent"``: the inner-product (Maiorana–McFarland) bent function. Every Walsh
    coefficient has magnitude exactly 2^{−L/2}, so one such query correlates equally with *all*
    2^L parities: the query family that refutes the "one r per query" step of KLNRS Theorem 5.1
    (docs/theorem51.md). The users' side refuses a field that is not {0,1}-valued, of odd
    length, or longer than 124 bits.

    A builder checks what needs no schema (types, identifier names, integer indices ≥ 0) and
    raises a ParameterError naming the value; a field a schema lacks is refused by
    ``Session.round`` (against the oracle's description) and by the users.

    Parameters
    ----------
    field : str, default "x"
        The {0,1} field of even length L.
    output : {"sign", "bit"}, default "sign"
        ``"sign"``: the value in {−1, +1}; ``"bit"``: the exponent mod 2 in {0, 1}.

    Returns
    -------
    QuerySpec
        ``QuerySpec("bent", {"field": field, "output": output})``.

    Raises
    ------
    ParameterError
        An unknown ``output`` or a ``field`` that is not an identifier.

    Examples
    --------
    >>> import ldp, numpy as np
    >>> from ldp.core.queries import make_query
    >>> schema = ldp.concept_class("parity", 4).schema  # x has L = 4 bits: x0·x2 + x1·x3
    >>> records = np.array([[1, 0, 1, 0, 0], [1, 1, 1, 1, 0], [0, 1, 0, 1, 0]], dtype=np.int16)
    >>> make_query(ldp.bent(), schema).evaluate(records).tolist()
    [-1.0, 1.0, -1.0]
    """
    if output not in ("sign", "bit"):
        raise ParameterError(f"bent: output must be 'sign' or 'bit', got {output!r}")
    return QuerySpec("bent", {"field": _identifier("bent: field", field), "output": output})


def user_parity(start: int, count: int, field: str = "x", output: str = "sign") -> QuerySpec:
    """A per-user family of parities: users split evenly into 2^L groups, one parity each.

    Users start..start+count−1, split evenly into 2^L groups; group c answers the parity
    (−1)^⟨r_c, x⟩ with r_c the binary expansion of c (``UserParityQuery``).

    Kind ``"user_parity"``: a per-user family. User u gets the candidate vector r(u) ∈ {0,1}^L,
    the L-bit binary expansion (x's bit 0 first) of its group in the even split of
    ``user_parity_groups(count, 2^L)`` (the first ``count mod 2^L`` groups get one user more).
    One request then asks 2^L different non-adaptive questions, one per group of users: the
    non-interactive local model lets every user run a randomizer of its own, fixed before any
    report (KLNRS Definition 4.4: LR_z(i, R) names the user i and its randomizer R). The value
    any one user reports about still depends on its own record alone, so a randomizer over it
    is exactly as private as over a fixed ``parity``. It needs the users' ids: it is not a
    statistical query. The field must be {0,1}-valued with at most 62 bits (checked by the
    users' side).

    A builder checks what needs no schema (types, identifier names, integer indices ≥ 0) and
    raises a ParameterError naming the value; a field a schema lacks is refused by
    ``Session.round`` (against the oracle's description) and by the users.

    Parameters
    ----------
    start : int
        The first user of the family, ≥ 0.
    count : int
        How many users, ≥ 1.
    field : str, default "x"
        The {0,1} field the parities are over (L = its length).
    output : {"sign", "bit"}, default "sign"
        ``"sign"``: (−1)^⟨r(u), x⟩; ``"bit"``: ⟨r(u), x⟩ mod 2.

    Returns
    -------
    QuerySpec
        ``QuerySpec("user_parity", {"field": field, "start": start, "count": count, "output": output})``.

    Raises
    ------
    ParameterError
        ``start`` < 0, ``count`` < 1, non-integers, an unknown ``output``, or a ``field`` that is
        not an identifier.

    Examples
    --------
    Eight users, L = 3: user u asks the parity of the bits of x named by the binary digits of u.

    >>> import ldp, numpy as np
    >>> from ldp.core.queries import make_query
    >>> query = make_query(ldp.user_parity(0, 8), ldp.concept_class("parity", 3).schema)
    >>> records = np.tile(np.array([1, 1, 1, 0], dtype=np.int16), (8, 1))  # everyone has x = 111
    >>> query.evaluate(records, users=np.arange(8)).tolist()  # (−1)^popcount(u)
    [1.0, -1.0, -1.0, 1.0, -1.0, 1.0, 1.0, -1.0]
    >>> ldp.user_parity(0, 0)
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: user_parity: count must be ≥ 1, got 0
    """
    if output not in ("sign", "bit"):
        raise ParameterError(f"user_parity: output must be 'sign' or 'bit', got {output!r}")
    count = _index("user_parity: count", count)
    if count < 1:
        raise ParameterError(f"user_parity: count must be ≥ 1, got {count}")
    return QuerySpec(
        "user_parity", {"field": _identifier("user_parity: field", field), "start": _index("user_parity: start", start), "count": count, "output": output}
    )


def product(*factors: QuerySpec) -> QuerySpec:
    """g(z) = Π_k g_k(z): the product of scalar queries (kind ``"product"``).

    Its bound is the product of the factors' bounds; its values, when every factor has a small
    finite set (≤ 4096 combinations), are the products of theirs.

    A builder checks what needs no schema (types, identifier names, integer indices ≥ 0) and
    raises a ParameterError naming the value; a field a schema lacks is refused by
    ``Session.round`` (against the oracle's description) and by the users.

    Parameters
    ----------
    *factors : QuerySpec
        One or more scalar query specs.

    Returns
    -------
    QuerySpec
        ``QuerySpec("product", {"factors": [factor.to_json(), ...]})``.

    Raises
    ------
    ParameterError
        No factor, or a factor that is not a ``QuerySpec``.

    Examples
    --------
    >>> import ldp, numpy as np
    >>> from ldp.core.queries import make_query
    >>> query = make_query(ldp.product(ldp.parity([0]), ldp.parity([1])), ldp.concept_class("parity", 3).schema)
    >>> records = np.array([[1, 0, 1, 0], [1, 1, 0, 1]], dtype=np.int16)
    >>> query.evaluate(records).tolist(), query.bound  # (−1)^x0 · (−1)^x1
    ([-1.0, 1.0], 1.0)
    """
    if not factors:
        raise ParameterError("product needs at least one factor (a QuerySpec)")
    return QuerySpec("product", {"factors": [_spec(f"product: factor {k}", f).to_json() for k, f in enumerate(factors)]})


def affine(query: QuerySpec, scale: float = 1.0, offset: float = 0.0) -> QuerySpec:
    """g(z) = scale · h(z) + offset for a scalar query h (kind ``"affine"``).

    Its values are scale·v + offset for h's values v (when finite), and its bound the largest
    of their magnitudes (else |scale|·b_h + |offset|).

    A builder checks what needs no schema (types, identifier names, integer indices ≥ 0) and
    raises a ParameterError naming the value; a field a schema lacks is refused by
    ``Session.round`` (against the oracle's description) and by the users.

    Parameters
    ----------
    query : QuerySpec
        h, a scalar query spec.
    scale : float, default 1.0
        A finite multiplier.
    offset : float, default 0.0
        A finite shift.

    Returns
    -------
    QuerySpec
        ``QuerySpec("affine", {"query": query.to_json(), "scale": scale, "offset": offset})``.

    Raises
    ------
    ParameterError
        ``query`` is not a ``QuerySpec``, or ``scale``/``offset`` is not a finite number.

    Examples
    --------
    Map a {0,1} bit to a ±1 sign, 2x − 1:

    >>> import ldp, numpy as np
    >>> from ldp.core.queries import make_query
    >>> query = make_query(ldp.affine(ldp.field_query("x", 0), scale=2.0, offset=-1.0), ldp.concept_class("parity", 3).schema)
    >>> query.evaluate(np.array([[1, 0, 1, 0], [0, 1, 0, 1]], dtype=np.int16)).tolist(), query.values().tolist()
    ([1.0, -1.0], [-1.0, 1.0])
    >>> ldp.affine(ldp.label_query(), scale=float("inf"))
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: affine: scale must be a finite number, got inf
    """
    return QuerySpec(
        "affine", {"query": _spec("affine: query", query).to_json(), "scale": _finite("affine: scale", scale), "offset": _finite("affine: offset", offset)}
    )


def record_query() -> QuerySpec:
    """The whole record (identity), for randomizers that randomize every field at once.

    Kind ``"record"``: its width is the schema's width (not a scalar query), and it has no small
    finite set of values; ``record_rr`` is the randomizer that takes it (each column through
    k-ary randomized response at ε/width, basic composition, KLNRS Claim 2.1).

    Returns
    -------
    QuerySpec
        ``QuerySpec("record", {})``.

    Examples
    --------
    >>> import ldp, numpy as np
    >>> from ldp.core.queries import make_query
    >>> query = make_query(ldp.record_query(), ldp.concept_class("parity", 3).schema)
    >>> query.width, query.evaluate(np.array([[1, 0, 1, 0]], dtype=np.int16)).tolist()
    (4, [[1, 0, 1, 0]])
    """
    return QuerySpec("record", {})


def prefix_index(length: int, candidates: Sequence[int] | np.ndarray, field: str = "x") -> QuerySpec:
    """Which of ``candidates`` the first ``length`` bits of a {0,1} field are (kind ``"prefix_index"``).

    The value is the candidate's position 0..m−1, or m = len(candidates) when the user's prefix is
    none of them; bit 0 of the field is the prefix's most significant bit. The users' side
    refuses a field that is not {0,1}-valued or longer than 62 bits, and a length beyond it.

    Parameters
    ----------
    length : int
        How many leading bits, ≥ 1.
    candidates : sequence of int
        Distinct prefixes in [0, 2^length), 1 to 4095 of them.
    field : str, default "x"
        The {0,1} field.

    Returns
    -------
    QuerySpec
        ``QuerySpec("prefix_index", {"field": field, "length": length, "candidates": [...]})``.

    Raises
    ------
    ParameterError
        A length < 1, candidates that are not distinct integers in [0, 2^length) or too many,
        or a field that is not an identifier.

    Examples
    --------
    >>> import ldp, numpy as np
    >>> from ldp.core.queries import make_query
    >>> query = make_query(prefix_index(2, [3, 1]), ldp.concept_class("parity", 3).schema)
    >>> records = np.array([[1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]], dtype=np.int16)  # prefixes 11, 01, 00
    >>> query.evaluate(records).tolist(), query.values().tolist()
    ([0.0, 1.0, 2.0], [0.0, 1.0, 2.0])
    """
    length = _index("prefix_index: length", length)
    if length < 1:
        raise ParameterError(f"prefix_index: length must be ≥ 1, got {length}")
    items = [_index(f"prefix_index: candidate {k}", c) for k, c in enumerate(np.asarray(candidates).ravel().tolist())]
    if not 1 <= len(items) < MAX_FINITE_VALUES:
        raise ParameterError(f"prefix_index: need 1 to {MAX_FINITE_VALUES - 1} candidates, got {len(items)}")
    if len(set(items)) != len(items) or max(items) >= 2**length:
        raise ParameterError(f"prefix_index: candidates must be distinct integers in [0, 2^{length}), got {items[:8]}")
    return QuerySpec("prefix_index", {"field": _identifier("prefix_index: field", field), "length": length, "candidates": items})
