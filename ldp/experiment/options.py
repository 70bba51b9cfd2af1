"""An experiment's settings from the command line: ``-o KEY=VALUE`` for each field of its config.

What: ``apply_options(config, options)`` returns a copy of the frozen dataclass ``config`` with
the options applied, each text converted to the type of the field's current value (a tuple: items
comma-separated, of the type of its first item); ``option_names`` lists what may be set.
Guarantee: an unknown key or a value of the wrong type is a ``ParameterError`` naming the key, the
value and what is allowed (one line on the command line).
Source: docs/design.md §5.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from ldp.core.errors import ParameterError

__all__ = ["apply_options", "option_names"]

C = TypeVar("C")


def option_names(config_type: type | None) -> tuple[str, ...]:
    """The settings ``-o`` may change: the fields of ``config_type`` (none without one)."""
    if config_type is None:
        return ()
    return tuple(f.name for f in dataclasses.fields(config_type))


def _convert(key: str, text: str, default: Any) -> Any:
    """``text`` as the type of ``default`` (tuples: comma-separated items like the default's)."""
    try:
        if isinstance(default, bool):
            if text.lower() not in {"true", "false", "1", "0", "yes", "no"}:
                raise ValueError(text)
            return text.lower() in {"true", "1", "yes"}
        if isinstance(default, tuple):
            item = type(default[0]) if default else str
            return tuple(_convert(key, part.strip(), item()) for part in text.split(",") if part.strip())
        if isinstance(default, (int, float)):
            return type(default)(text)
        return text
    except ValueError:
        raise ParameterError(f"option {key}={text!r}: expected {type(default).__name__}" + (" items, comma-separated" if isinstance(default, tuple) else "")) from None


def apply_options(config: C, options: Mapping[str, Any]) -> C:
    """A copy of the dataclass ``config`` with ``-o key=value`` options applied (strings are
    converted to the type of the field's current value). Unknown keys are a ``ParameterError``
    listing the known ones."""
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}  # type: ignore[arg-type]
    changes = {}
    for key, value in options.items():
        if key not in fields:
            raise ParameterError(f"unknown option {key!r} for this experiment; options: {sorted(fields)}")
        changes[key] = _convert(key, value, fields[key]) if isinstance(value, str) else value
    return dataclasses.replace(config, **changes)  # type: ignore[type-var]
