"""``python -m backtrail.mcp_server``: ``backtrail mcp`` with every setting from the
environment (``MCP_TRANSPORT=http`` serves HTTP)."""

from backtrail.mcp_server import main

if __name__ == "__main__":
    main()
