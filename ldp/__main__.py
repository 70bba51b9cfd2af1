"""``python -m ldp``: the same command line as ``ldp-sim`` (``ldp.cli.main``)."""

from ldp.cli.main import main

raise SystemExit(main())
