"""``python -m netslo.agent``: see ``netslo.agent.cli``."""

import sys

from netslo.agent.cli import main

sys.exit(main())
