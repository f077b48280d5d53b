"""A *conformant* agent that also advertises draft (unstable-schema) capabilities.

``sessionCapabilities.fork`` and ``agentCapabilities.providers`` are defined by the
official unstable schema, not the stable one.  They are the protocol's own names for
features in the works, so using them is not "custom data at the root of a spec type"
(ext.no-root-fields); real adapters (claude-agent-acp) do exactly this.  The suite must
not fail it.  ``python tests/peers/draft_feature_agent.py [mock_agent options]``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mock_agent.agent import MockAgent
from mock_agent.cli import run


class DraftFeatureAgent(MockAgent):
    def agent_capabilities(self) -> dict[str, Any]:
        caps = super().agent_capabilities()
        caps["sessionCapabilities"] = {**caps.get("sessionCapabilities", {}), "fork": {}}
        caps["providers"] = {}
        return caps


if __name__ == "__main__":
    run(sys.argv[1:], agent_cls=DraftFeatureAgent)
