"""Broken variants of the central mechanisms, built from their real source for the exact audits.

A test names one function of a module and one piece of its source text to change; the function is
recompiled with that change in a copy of the module's namespace, so the mutant runs exactly the
code it replaces except for the change. The change must match exactly once: a refactor that moves
the text fails the test loudly instead of silently auditing the unchanged code.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any


def mutant_namespace(module: ModuleType, function: Callable[..., Any], old: str, new: str) -> dict[str, Any]:
    """``module``'s namespace with ``function`` recompiled from its source, ``old`` → ``new``."""
    src = inspect.getsource(function)
    assert src.count(old) == 1, f"mutation site {old!r} not found exactly once"
    ns = dict(vars(module))
    exec(compile(src.replace(old, new), str(module.__file__), "exec"), ns)  # noqa: S102 - test-only mutant
    return ns
