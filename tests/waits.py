"""How long a test waits for another process before it calls the wait a failure.

A wait bound is a guard against a hang, never a claim about speed: a hung run fails at it, a
slow one passes. CI runs the suite on a 2-core machine where two pytest-xdist workers and the
client processes their tests start share the cores (and a user may run ``make test`` beside other
work), so a process that starts in 2 s when idle can take a minute. Every wait on a process in
the suite (its start, an answer, its exit, a subprocess's run) is bounded by ``PROCESS_WAIT_S``,
not by a figure tuned on an idle machine. Waits that are the thing under test (a round deadline
that must expire, a part timeout) keep their own values.
"""

from __future__ import annotations

PROCESS_WAIT_S = 300.0
