"""``python -m mock_client``."""

import sys

from mock_client.cli import main

sys.exit(main())
