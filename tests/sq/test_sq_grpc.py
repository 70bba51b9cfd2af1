"""The SQ oracles over the real gRPC transport (client processes), once.

Same seed, same program: LocalSQOracle's answers over gRPC equal the in-process ones bit for
bit, a non-adaptive step is one non-interactive round, and the clients' own ledgers refuse a
budget-split step past the budget.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldp.core.errors import SessionError
from ldp.local.oracle import InProcessLROracle
from ldp.sq.conjunction_learner import learn_conjunction
from ldp.sq.local_sq_oracle import LocalSQOracle
from ldp.sq.sq_oracle import RefusedUsersError
from tests.sq.sq_helpers import conjunction_population

launcher = pytest.importorskip("ldp.wire.launcher")

pytestmark = pytest.mark.timeout(120)


async def test_local_sq_oracle_over_grpc() -> None:
    spec = conjunction_population(200_000, seed=11)
    inproc = LocalSQOracle(InProcessLROracle(spec), 1.0, adaptive=False)
    reference = await learn_conjunction(inproc, 3, 0.5, 0.2)
    async with launcher.launch_local(spec, processes=2) as lr:
        oracle = LocalSQOracle(lr, 1.0, schema=spec.schema, adaptive=False)
        result = await learn_conjunction(oracle, 3, 0.5, 0.2)
        np.testing.assert_array_equal(result.estimates, reference.estimates)
        assert result.hypothesis == reference.hypothesis
        assert len(lr.transcript.rounds) == 1
        with pytest.raises(SessionError):
            await oracle.ask(list(oracle.log[0].queries[:1]), 0.5, 0.8)
        # Fresh users (after the learner's), every one answering both queries with ε/2 ...
        split = LocalSQOracle(lr, 1.0, schema=spec.schema, mode="budget_split", first_user=oracle.next_user, users=20_000)
        await split.ask(list(oracle.log[0].queries[:2]), 0.3, 0.8)
        with pytest.raises(RefusedUsersError) as info:  # ... so the clients' ledgers refuse a next step
            await split.ask(list(oracle.log[0].queries[:1]), 0.3, 0.8)
        assert info.value.refused == 20_000


async def test_simulation_algorithms_over_grpc_match_in_process() -> None:
    """The local algorithms of simulations/sq_local.py give the same outputs over gRPC."""
    from ldp.simulations.sq_local import ALGORITHMS, population

    for name, (algorithm, _interactive, _) in ALGORITHMS.items():
        spec = population(3 * 500, seed=5, epsilon=2.0)
        reference, _ = await algorithm(InProcessLROracle(spec), 500, 3, 2.0)
        async with launcher.launch_local(spec, processes=2) as lr:
            outputs, _ = await algorithm(lr, 500, 3, 2.0)
        np.testing.assert_array_equal(outputs, reference, err_msg=name)
