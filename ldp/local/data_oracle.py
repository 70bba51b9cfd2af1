"""The users of some data, hosted in this process: ``DataLROracle``.

What ``ldp-sim clients --data FILE`` hosts, without the processes: the data's users split into
``shards`` ranges, each a ``Shard`` (the same users' side code every transport runs: its ledger,
its budget, its exact samplers), all drawing with one report key. With the same key, the same
users and the same requests, its reports are bit-identical to those of client processes that
host the same data (``ldp.wire.data_clients.launch_data``; tests/cli/test_estimate_cli.py).

The data is any ``Holdings``: a ``DataPopulation`` read from a CSV or Parquet file
(``ldp.core.datafile.load_data``), a ``ColumnData`` (``ldp.core.column``, one column of the
caller's), or a ``PopulationSpec``. Moved here from ``simulations/real_data.py`` (issue 25).
"""

from __future__ import annotations

import asyncio

from ldp.core.errors import ParameterError, require_integer
from ldp.core.population import PopulationDescription
from ldp.local.messages import RoundReply, RoundRequest
from ldp.local.oracle import LROracle, ShardRange
from ldp.local.shard import Holdings, Shard

__all__ = ["DataLROracle"]


class DataLROracle(LROracle):
    """An ``LROracle`` over ``data``'s users, answered by ``shards`` in-process ``Shard`` objects.

    Parameters
    ----------
    data : Holdings
        The users' records (a ``DataPopulation``, ``ColumnData`` or ``PopulationSpec``).
    budget : float
        Each user's total ε (their ledgers refuse a report beyond it).
    key : bytes
        The users' report key (32 bytes): the experiment's, e.g. ``derive_key_bytes(label, seed)``
        for a reproducible run, or ``ldp.core.rng.secret_key()``.
    shards : int, default 1
        How many shards (ranges of users ⌊n·k/S⌋ .. ⌊n·(k+1)/S⌋, as the launchers split them);
        the reports do not depend on it.

    Examples
    --------
    >>> import ldp, numpy as np
    >>> from ldp.core.column import frequency_column
    >>> from ldp.core.rng import derive_key_bytes
    >>> data = frequency_column(np.array(["a", "b", "a", "a"] * 250))
    >>> oracle = DataLROracle(data, budget=1.0, key=derive_key_bytes("doc", 0), shards=2)
    >>> session = ldp.Session(oracle, ldp.SessionKind.NON_INTERACTIVE)
    >>> (reports,) = ldp.run(session.round([ldp.Request.of(range(1000), ldp.RandomizerSpec("kary_rr", ldp.field_query("value"), 1.0))]))
    >>> reports.counts()
    {'answered': 1000, 'refused': 0, 'missing': 0, 'error': 0}
    """

    def __init__(self, data: Holdings, budget: float, key: bytes, shards: int = 1) -> None:
        super().__init__()
        if not isinstance(getattr(data, "size", None), int) or not callable(getattr(data, "records", None)):
            raise ParameterError(f"data must be the users' holdings (ldp.load_data(...) or a column from ldp.core.column), got {data!r}"[:300])
        n = data.size
        # at most one shard per user: a typo like 2^63 must not build 2^63 boundaries
        shards = require_integer("shards", shards, 1, max(n, 1), f"[1, {n}] (one shard per user at most)")
        bounds = [n * k // shards for k in range(shards + 1)]
        self.data = data
        self._shards = {f"shard-{k}": Shard(data, lo, hi - lo, budget=budget, key=key) for k, (lo, hi) in enumerate(zip(bounds, bounds[1:])) if hi > lo}

    @property
    def shards(self) -> list[ShardRange]:
        return [ShardRange(key, s.first_user, s.count) for key, s in self._shards.items()]

    @property
    def description(self) -> PopulationDescription:
        return PopulationDescription(self.data.size, self.data.schema)

    async def _exchange(self, sent: dict[str, RoundRequest], deadline_s: float) -> dict[str, RoundReply | None]:
        replies: dict[str, RoundReply | None] = {key: self._shards[key].answer(request) for key, request in sent.items()}
        await asyncio.sleep(0)
        return replies
