"""The everyday API's docstrings are numpy style and their examples run.

Every module that ``ldp._EXPORTS`` names runs under ``doctest.testmod`` with zero failures and at
least one example; every exported name (and the main public methods of the exported classes)
has a one-line summary, a ``Parameters`` section when it takes parameters, ``Returns`` or
``Yields`` when it returns something, and an ``Examples`` section with at least one example.
Both checkers are shown to fail on deliberately broken input, so a passing run means something.
"""

from __future__ import annotations

import contextlib
import doctest
import inspect
import io
import re
import types
from typing import Any

import pytest

import ldp

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
MODULES = sorted(set(ldp._EXPORTS.values()))

# The main public methods of the exported classes: documented like the functions.
METHODS: dict[str, list[str]] = {
    "ConceptClass": ["random_target"],
    "Referee": ["error", "clean_error"],
    "PopulationSpec": ["records", "description", "referee"],
    "LocalRandomizer": ["build", "inputs", "sample", "apply"],
    "BinaryRandomizedResponse": ["estimate", "variance"],
    "KaryRandomizedResponse": ["estimate", "frequencies"],
    "DiscreteLaplaceRandomizer": ["estimate"],
    "Ledger": ["charge", "refund", "can_charge", "remaining"],
    "LROracle": ["run_round"],
    "InProcessLROracle": ["run_round"],
    "Reports": ["counts"],
    "Session": ["round"],
    "Request": ["of"],
    "Users": ["range", "of"],
}

_NO_RETURN = {None, "None", inspect.Signature.empty}


def run_doctests(module: types.ModuleType) -> tuple[int, int, str]:
    """``doctest.testmod`` over ``module``: (failures, examples tried, the failure report)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        failed, attempted = doctest.testmod(module, optionflags=FLAGS, verbose=False, report=False)
    return failed, attempted, out.getvalue()


def _section(doc: str, title: str) -> bool:
    return re.search(rf"^{title}\n-{{{len(title)}}}$", doc, flags=re.M) is not None


def _takes_parameters(obj: Any) -> bool:
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):  # e.g. exception classes: they take a message
        return True
    return any(p.name not in ("self", "cls") for p in signature.parameters.values())


def _returns_something(obj: Any) -> bool:
    if inspect.isclass(obj):
        return False
    try:
        return inspect.signature(obj).return_annotation not in _NO_RETURN
    except (TypeError, ValueError):
        return False


def numpy_doc_problems(obj: Any) -> list[str]:
    """What ``obj``'s own docstring lacks of the numpy style this project uses ([] when none)."""
    raw = getattr(obj, "__doc__", None)
    if not raw or not raw.strip():
        return ["no docstring"]
    doc = inspect.cleandoc(raw)
    lines = doc.splitlines()
    problems = []
    if not lines[0].strip() or (len(lines) > 1 and lines[1].strip()):
        problems.append("the summary is not one line followed by a blank line")
    if _takes_parameters(obj) and not _section(doc, "Parameters"):
        problems.append("no 'Parameters' section")
    if _returns_something(obj) and not (_section(doc, "Returns") or _section(doc, "Yields")):
        problems.append("no 'Returns' or 'Yields' section")
    if not _section(doc, "Examples"):
        problems.append("no 'Examples' section")
    elif ">>>" not in doc.split("Examples\n--------", 1)[1]:
        problems.append("an 'Examples' section without an example")
    return problems


def _documented() -> list[str]:
    return sorted(ldp._EXPORTS) + [f"{cls}.{method}" for cls, methods in sorted(METHODS.items()) for method in methods]


def _resolve(name: str) -> Any:
    obj: Any = ldp
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("module_name", MODULES)
def test_every_exporting_module_has_examples_and_they_pass(module_name: str) -> None:
    module = __import__(module_name, fromlist=["_"])
    failed, attempted, report = run_doctests(module)
    assert failed == 0, report
    assert attempted >= 1, f"{module_name} has no doctest example"


@pytest.mark.parametrize("name", _documented())
def test_every_exported_name_has_a_numpy_style_docstring(name: str) -> None:
    assert numpy_doc_problems(_resolve(name)) == [], name


def test_the_method_list_names_real_methods_of_exported_classes() -> None:
    for cls, methods in METHODS.items():
        assert cls in ldp._EXPORTS and inspect.isclass(getattr(ldp, cls))
        for method in methods:
            assert callable(getattr(getattr(ldp, cls), method)), f"{cls}.{method}"


# --- the checkers fail on broken input ---


def test_the_doctest_checker_reports_a_wrong_output() -> None:
    fake = types.ModuleType("fake_broken_module")
    fake.__doc__ = """A module whose example is wrong.

    >>> 1 + 1
    3
    """
    failed, attempted, report = run_doctests(fake)
    assert (failed, attempted) == (1, 1)
    assert "Expected:" in report and "3" in report and "Got:" in report


def test_the_doctest_checker_reports_a_module_without_examples() -> None:
    fake = types.ModuleType("fake_silent_module")
    fake.__doc__ = "A module with no example at all."
    assert run_doctests(fake)[:2] == (0, 0)  # the test above asserts attempted ≥ 1: this fails it


def test_the_docstring_checker_reports_missing_sections() -> None:
    def undocumented(x: int) -> int:
        return x

    def old_style(x: int) -> int:
        """Twice x, in a sentence that runs on
        to a second line. No sections."""
        return 2 * x

    def numpy_style(x: int) -> int:
        """Twice x.

        Parameters
        ----------
        x : int
            Any integer.

        Returns
        -------
        int
            2x.

        Examples
        --------
        >>> numpy_style(2)
        4
        """
        return 2 * x

    def no_example(x: int) -> None:
        """Nothing.

        Parameters
        ----------
        x : int
            Ignored.

        Examples
        --------
        None here.
        """

    assert numpy_doc_problems(undocumented) == ["no docstring"]
    assert numpy_doc_problems(old_style) == [
        "the summary is not one line followed by a blank line",
        "no 'Parameters' section",
        "no 'Returns' or 'Yields' section",
        "no 'Examples' section",
    ]
    assert numpy_doc_problems(numpy_style) == []
    assert numpy_doc_problems(no_example) == ["an 'Examples' section without an example"]
