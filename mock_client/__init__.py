"""The reference ACP v1 client: small, deterministic and conforming.

``python -m mock_client --agent CMD --prompt TEXT`` launches the agent,
initializes (advertising fs by default; terminal, which runs real
commands confined to the session directory, only with ``--caps fs,terminal``), opens a session in
the current directory and runs one prompt turn per ``--prompt``; without
``--prompt`` it reads one prompt per stdin line.  It serves ``fs/*`` on
real files confined to the session directory and ``terminal/*`` with real
processes, answers permission requests by ``--permission`` policy, and
cancels a running turn on SIGINT (answering every pending permission
request ``cancelled``).

It is the client the client-certification suite proves itself against
(``pytest --acp-client="python -m mock_client --agent {agent} --prompt hi"``)
and the base class of the deliberately broken clients in
``tests/peers/broken_clients.py``: every message it sends is built by one
small overridable ``MockClient`` method.
"""

from acp_conformance import __version__ as _package_version
from mock_client.cli import build_parser, main, parse_caps
from mock_client.client import CLIENT_NAME, SUPPORTED_VERSION, ClientOptions, MockClient
from mock_client.terminals import RealTerminals, tail_on_char_boundary

__version__: str = _package_version

__all__ = [
    "CLIENT_NAME",
    "SUPPORTED_VERSION",
    "ClientOptions",
    "MockClient",
    "RealTerminals",
    "__version__",
    "build_parser",
    "main",
    "parse_caps",
    "tail_on_char_boundary",
]
