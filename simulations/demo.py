"""`make demo`: the main job, quick. Randomized response first; then, when present, the separation."""

from __future__ import annotations

import sys


def main() -> None:
    from simulations import randomized_response

    randomized_response.main(sys.argv[1:])


if __name__ == "__main__":
    main()
