"""``python -m mock_agent.relay``: the relay agent client certification launches.

It lives in ``acp_conformance.harness.relay`` (the other end of the suite's control channel);
this name keeps the command editors were configured with working.
"""

import sys

from acp_conformance.harness.relay import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
