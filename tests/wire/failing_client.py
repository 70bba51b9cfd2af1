"""A real client process whose sampler fails at one call: a fault injected for the tests.

    python tests/wire/failing_client.py FAIL_AT -- CLIENT_ARGS...

runs ``ldp.wire.client.main(CLIENT_ARGS)`` with ``LocalRandomizer.sample`` raising
``RuntimeError("the sampler broke (failing_client.py)")`` at its FAIL_AT-th call (counted from 1,
across rounds); every other call is the real sampler.
"""

from __future__ import annotations

import sys
from typing import Any


def main(argv: list[str]) -> int:
    fail_at, sep, *client_args = argv
    assert sep == "--", "usage: failing_client.py FAIL_AT -- CLIENT_ARGS..."
    from ldp.core.randomizers import LocalRandomizer
    from ldp.wire import client

    real = LocalRandomizer.sample
    calls = [0]

    def sample(self: LocalRandomizer, inputs: Any, randomness: Any) -> Any:
        calls[0] += 1
        if calls[0] == int(fail_at):
            raise RuntimeError("the sampler broke (failing_client.py)")
        return real(self, inputs, randomness)

    LocalRandomizer.sample = sample  # type: ignore[method-assign]
    return client.main(client_args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
