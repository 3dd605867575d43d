"""``python -m netslo.report.regression``: see ``cli``."""

import sys

from netslo.report.regression.cli import main

sys.exit(main())
