"""``python -m netslo.report.regression``: see ``cli``."""

import sys

from .cli import main

sys.exit(main())
