"""Client certification (``pytest --acp-client=CMD``): options and configuration.

Placeholder wired into ``pytest_plugin``: client certification is being
built (see README "Client certification").  Until then ``--acp-client`` is
a clear usage error rather than a silent no-op.
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["add_options", "configure"]


def add_options(group: Any) -> None:
    group.addoption(
        "--acp-client",
        metavar="COMMAND",
        help="certify the ACP client started by this command ({agent} is replaced by the mock agent's command)",
    )


def configure(config: pytest.Config, state: Any) -> None:
    raise pytest.UsageError("--acp-client: client certification is not available in this version yet")
