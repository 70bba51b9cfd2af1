"""Statistical-query oracles and the SQ ↔ local simulations (KLNRS §4).

Importing ``ldp.sq`` registers its query kinds (``lr_ratio``), so client processes that must
evaluate them (e.g. a ``LocalSQOracle`` serving an ``SQBackedLROracle`` over gRPC) import it too.
"""

from ldp.sq import simulation as _simulation  # noqa: F401  (registers the lr_ratio query kind)
from ldp.sq.sq_oracle import InsufficientUsersError, RefusedUsersError, SQOracle, SQStep

__all__ = ["SQOracle", "SQStep", "InsufficientUsersError", "RefusedUsersError"]
