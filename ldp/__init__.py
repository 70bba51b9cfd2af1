"""ldp — a simulator of the local model of differential privacy.

Everything a study needs is one import away, and loaded only when first used (so ``import ldp``
costs a few milliseconds; the gRPC transport is imported only by a program that asks for it):

>>> import ldp
>>> cc = ldp.concept_class("masked_parity", 4)
>>> population = ldp.PopulationSpec(cc, cc.random_target(ldp.generator(0, "target")), size=10_000, budget=1.0, seed=0)
>>> oracle = ldp.InProcessLROracle(population)
>>> session = ldp.Session(oracle, ldp.SessionKind.NON_INTERACTIVE)
>>> rr = ldp.RandomizerSpec("binary_rr", ldp.field_query("b"), epsilon=1.0)
>>> (reports,) = ldp.run(session.round([ldp.Request.of(range(10_000), rr)]))
>>> estimate = ldp.BinaryRandomizedResponse(1.0).estimate(reports.values).mean()
>>> bool(abs(estimate - 0.5) < 0.05)  # Pr[b = 1] = 1/2, debiased from ε = 1 reports
True

Layers (imports point down only; see docs/design.md §2):

- ``ldp.core``      pure math: randomness, schema/queries, randomizers, budgets, concepts, audit
- ``ldp.local``     the LR oracle, shards (the users' side), sessions, transcripts
- ``ldp.wire``      the gRPC transport: aggregator server, client processes, launcher
- ``ldp.sq``        SQ oracles and the SQ ↔ local simulations (KLNRS §4)
- ``ldp.learners``  local learners (MASKED-PARITY, PARITY attempts, SQ learners)
- ``ldp.central``   trusted-curator mechanisms and learners (the baselines)

The names below are the everyday workflow; everything else lives in its layer's module.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

# name → module that defines it (PEP 562 lazy attributes: nothing below is imported until used)
_EXPORTS: dict[str, str] = {
    # data: concept classes, populations, records
    "concept_class": "ldp.core.concepts",
    "ConceptClass": "ldp.core.concepts",
    "Referee": "ldp.core.concepts",
    "PopulationSpec": "ldp.core.population",
    "load_data": "ldp.core.datafile",
    "generator": "ldp.core.rng",
    # queries
    "QuerySpec": "ldp.core.queries",
    "field_query": "ldp.core.query_specs",
    "label_query": "ldp.core.query_specs",
    "conjunction": "ldp.core.query_specs",
    "parity": "ldp.core.query_specs",
    "bent": "ldp.core.query_specs",
    "user_parity": "ldp.core.query_specs",
    "product": "ldp.core.query_specs",
    "affine": "ldp.core.query_specs",
    "record_query": "ldp.core.query_specs",
    # randomizers and their audit
    "RandomizerSpec": "ldp.core.randomizers",
    "LocalRandomizer": "ldp.core.randomizers",
    "BinaryRandomizedResponse": "ldp.core.rr_mechanisms",
    "KaryRandomizedResponse": "ldp.core.rr_mechanisms",
    "DiscreteLaplaceRandomizer": "ldp.core.laplace",
    "randomizer_kinds": "ldp.core.randomizers",
    "verify_exact": "ldp.core.audit",
    "audit_epsilon": "ldp.core.audit",
    # budgets
    "Ledger": "ldp.core.budget",
    # talking to users
    "LROracle": "ldp.local.oracle",
    "InProcessLROracle": "ldp.local.oracle",
    "Reports": "ldp.local.oracle",
    "Session": "ldp.local.session",
    "Request": "ldp.local.session",
    "SessionKind": "ldp.local.messages",
    "Users": "ldp.local.messages",
    "Status": "ldp.local.messages",
    "DataLROracle": "ldp.local.data_oracle",
    "launch_local": "ldp.wire.launcher",
    "launch_data": "ldp.wire.data_clients",
    # the short API: one column, one call (ldp.experiment.estimate)
    "frequencies": "ldp.experiment.estimate",
    "mean": "ldp.experiment.estimate",
    "heavy_hitters": "ldp.experiment.estimate",
    "Estimates": "ldp.experiment.estimate",
    "sketch_frequencies": "ldp.experiment.sketch_estimate",
    "grpc_oracle_factory": "ldp.wire.launcher",
    # experiments (ldp-sim list / run): a user's own joins with one call
    "register_experiment": "ldp.experiment.registry",
    # a coroutine run to completion, in a script or a notebook alike
    "run": "ldp.local.blocking",
    # errors
    "LDPError": "ldp.core.errors",
    "ParameterError": "ldp.core.errors",
}

__all__ = sorted([*_EXPORTS, "__version__"])

def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ldp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # cache: the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, eagerly
    from ldp.core.audit import audit_epsilon, verify_exact
    from ldp.core.budget import Ledger
    from ldp.core.concepts import ConceptClass, Referee, concept_class
    from ldp.core.datafile import load_data
    from ldp.core.errors import LDPError, ParameterError
    from ldp.core.laplace import DiscreteLaplaceRandomizer
    from ldp.core.population import PopulationSpec
    from ldp.core.queries import QuerySpec
    from ldp.core.query_specs import affine, bent, conjunction, field_query, label_query, parity, product, record_query, user_parity
    from ldp.core.randomizers import LocalRandomizer, RandomizerSpec, randomizer_kinds
    from ldp.core.rng import generator
    from ldp.core.rr_mechanisms import BinaryRandomizedResponse, KaryRandomizedResponse
    from ldp.experiment.estimate import Estimates, frequencies, heavy_hitters, mean
    from ldp.experiment.registry import register_experiment
    from ldp.experiment.sketch_estimate import sketch_frequencies
    from ldp.local.blocking import run
    from ldp.local.data_oracle import DataLROracle
    from ldp.local.messages import SessionKind, Status, Users
    from ldp.local.oracle import InProcessLROracle, LROracle, Reports
    from ldp.local.session import Request, Session
    from ldp.wire.data_clients import launch_data
    from ldp.wire.launcher import grpc_oracle_factory, launch_local

try:  # one source: the version in pyproject.toml, as installed
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as _version

    __version__ = _version("ldp-sim")
except PackageNotFoundError:  # pragma: no cover - running from a source tree that was never installed
    __version__ = "0+unknown"
