"""``python -m mock_agent``: the reference agent over stdio."""

from mock_agent.cli import run

if __name__ == "__main__":
    run()
