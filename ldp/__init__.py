"""ldp — a simulator of the local model of differential privacy.

Layers (imports point down only; see docs/design.md §2):

- ``ldp.core``      pure math: randomness, schema/queries, randomizers, budgets, concepts, audit
- ``ldp.local``     the LR oracle, shards (the users' side), sessions, transcripts
- ``ldp.wire``      the gRPC transport: aggregator server, client processes, launcher
- ``ldp.sq``        SQ oracles and the SQ ↔ local simulations (KLNRS §4)
- ``ldp.learners``  local learners (MASKED-PARITY, PARITY attempts, SQ learners)
- ``ldp.central``   trusted-curator mechanisms and learners (the baselines)
"""

from ldp.core.concepts import ConceptClass, Referee, concept_class
from ldp.core.errors import LDPError
from ldp.core.population import PopulationSpec
from ldp.core.randomizers import LocalRandomizer, RandomizerSpec
from ldp.local.messages import SessionKind, Users
from ldp.local.oracle import InProcessLROracle, LROracle, Reports
from ldp.local.session import Request, Session

__all__ = [
    "ConceptClass",
    "Referee",
    "concept_class",
    "LDPError",
    "PopulationSpec",
    "LocalRandomizer",
    "RandomizerSpec",
    "SessionKind",
    "Users",
    "InProcessLROracle",
    "LROracle",
    "Reports",
    "Request",
    "Session",
]
try:  # one source: the version in pyproject.toml, as installed
    from importlib.metadata import PackageNotFoundError, version as _version

    __version__ = _version("ldp")
except PackageNotFoundError:  # pragma: no cover - running from a source tree that was never installed
    __version__ = "0+unknown"
