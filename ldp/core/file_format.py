"""Versioned JSON files: the ``format`` key, unknown keys and missing keys, each refused naming it.

A file that a user keeps and a later version of ldp reads (a schema, a spec, a configuration)
carries ``"format": N``. Reading it (issue 23, invariant I6; docs/design.md):

- another ``format`` (2, "1", true) is refused, naming both versions and how to write it again;
- an unknown key is refused, listing the keys the format has (a hand edit's typo, or a newer
  version's key, is never dropped silently);
- a missing key is refused, listing the keys the format needs;
- a file *without* a ``format`` key is the unversioned layout written before format 1. It is read
  deliberately, so that the files users already hold keep working (and, for a spec, keep their
  records and ledgers); its unknown keys are refused too.

Each reader checks its values' types itself (the message then names the key and its type).
Readers: schema files (``ldp.core.datafile``), population specs
(``ldp.core.population.PopulationSpec.from_json``) and client configurations
(``ldp.wire.client_config.ClientConfig.from_json``, where ``format`` is required).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ldp.core.errors import ParameterError

__all__ = ["read_format", "check_keys"]


def read_format(data: Mapping[str, Any], *, what: str, version: int, rewrite: str) -> int | None:
    """The ``format`` of a versioned JSON object: ``version``, or None when it has no such key.

    Parameters
    ----------
    data : Mapping
        The file's top-level JSON object.
    what : str
        What the file is, for the message (e.g. "schema", "population spec").
    version : int
        The format this version of ldp writes and reads.
    rewrite : str
        How to write the file again with this version (ends the message for another format).

    Returns
    -------
    int or None
        ``version``, or None for the unversioned layout written before format 1.

    Raises
    ------
    ParameterError
        ``format`` is anything but ``version`` (another integer, a string, a bool).
    """
    if "format" not in data:
        return None
    found = data["format"]
    if isinstance(found, bool) or not isinstance(found, int) or found != version:
        raise ParameterError(f"{what} key 'format' is {found!r}; this version of ldp reads format {version} ({rewrite})"[:400])
    return version


def check_keys(data: Mapping[str, Any], *, what: str, version: int, known: Sequence[str], required: Sequence[str]) -> None:
    """Refuse an unknown key (listing ``known``) or a missing one (listing ``required``).

    Parameters
    ----------
    data : Mapping
        The file's top-level JSON object.
    what : str
        What the file is, for the message.
    version : int
        The format whose keys ``known`` and ``required`` are (named in the message).
    known : sequence of str
        Every key the format has (``format`` included).
    required : sequence of str
        The keys this file must have (fewer for the unversioned layout).

    Raises
    ------
    ParameterError
        "unknown <what> keys [...] (format N has [...])", or "the <what> has no 'k' key
        (format N needs [...])".
    """
    unknown = sorted(str(k) for k in data if k not in known)
    if unknown:
        raise ParameterError(f"unknown {what} keys {unknown} (format {version} has {list(known)})"[:400])
    for key in required:
        if key not in data:
            raise ParameterError(f"the {what} has no {key!r} key (format {version} needs {list(required)})")
