"""``python -m acp_conformance.scenario``: see ``acp_conformance.scenario.cli``."""

import sys

from acp_conformance.scenario.cli import main

sys.exit(main())
