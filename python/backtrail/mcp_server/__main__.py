"""``python -m backtrail.mcp_server``: ``backtrail mcp`` without the command line
(settings from the environment only)."""

from backtrail.cli_mcp import main_from_env

if __name__ == "__main__":
    main_from_env()
