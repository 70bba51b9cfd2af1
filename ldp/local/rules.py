"""Session rules, as the users' side enforces them (KLNRS Definition 4.4).

One ``SessionRules`` object per party that answers rounds (a ``Shard``, or the
``SQBackedLROracle`` that simulates users): it admits a round or says why not.

- A NON_INTERACTIVE session has exactly one round, numbered 0; any later round is refused (all
  requests are fixed before any reply).
- An INTERACTIVE session takes rounds in strictly increasing order; a replayed or older round is
  refused, so it cannot draw fresh randomness or be charged twice.
- A session never changes kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ldp.local.messages import RoundRequest, SessionKind

__all__ = ["SessionRules"]


@dataclass
class _SessionState:
    kind: SessionKind
    last_round: int


@dataclass
class SessionRules:
    """Remembers each session's kind and last admitted round."""

    _sessions: dict[int, _SessionState] = field(default_factory=dict)

    def admit(self, request: RoundRequest) -> str:
        """'' if the round may be answered (and records it), else the reason it is refused."""
        try:
            kind = SessionKind(request.session_kind)
        except ValueError:
            return f"unknown session kind {request.session_kind!r}; allowed: {[k.name for k in SessionKind]}"
        state = self._sessions.get(request.session_id)
        if state is None:
            if request.round < 0:
                return f"round numbers start at 0, got {request.round}"
            if kind == SessionKind.NON_INTERACTIVE and request.round != 0:
                return f"a non-interactive session has exactly one round, numbered 0; got round {request.round}"
            self._sessions[request.session_id] = _SessionState(kind, request.round)
            return ""
        if state.kind != kind:
            return f"session {request.session_id} is {state.kind.name}; a round cannot change it to {kind.name}"
        if kind == SessionKind.NON_INTERACTIVE:
            return (
                f"session {request.session_id} is non-interactive and already answered its one round; "
                f"refusing round {request.round} (KLNRS Def. 4.4: all requests are fixed before any reply)"
            )
        if request.round <= state.last_round:
            return (
                f"session {request.session_id}: round {request.round} is not after the last answered round "
                f"{state.last_round} (replays are refused)"
            )
        state.last_round = request.round
        return ""
