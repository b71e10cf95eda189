"""``python -m slackswap``: the command line (see slackswap.cli)."""

from slackswap.cli import main

raise SystemExit(main())
