"""A hostile student for tests/classroom/test_classroom_abuse.py: the real ``ldp-sim join``, with one
behaviour changed in this process only, as a student who modified their copy could.

    python tests/classroom/hostile_student.py silent-ledger COUNT_FILE -- JOIN_ARGS...
        ignores every ledger query (appends one line to COUNT_FILE per query it was sent)
    python tests/classroom/hostile_student.py error-text TEXT -- JOIN_ARGS...
        answers every round with an error whose text is TEXT (markup, for the dashboard)
"""

from __future__ import annotations

import sys
from typing import Any


def main(argv: list[str]) -> int:
    mode, arg, sep, *join_args = argv
    assert sep == "--", "usage: hostile_student.py MODE ARG -- JOIN_ARGS..."
    from ldp.wire import client, codec

    if mode == "silent-ledger":

        def no_ledger(query_id: int, first_user: int, units: Any) -> list[Any]:
            with open(arg, "a", encoding="utf-8") as f:
                f.write(f"{query_id}\n")
            return []  # nothing is sent: the teacher waits for a report that never comes

        codec.encode_ledger = no_ledger  # type: ignore[assignment]
    elif mode == "error-text":
        from ldp.local.shard import ReplyPart

        def error_reply(shard: Any, parts: Any, part_bytes: int = 0) -> Any:
            yield ReplyPart(client._round_error(parts, arg), True)  # noqa: SLF001

        client.reply_parts = error_reply  # type: ignore[assignment]
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    from ldp.cli.main import main as ldp_main

    return ldp_main(["join", *join_args])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
