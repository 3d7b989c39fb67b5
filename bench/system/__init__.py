"""The whole-system benchmark and soak: the product driven through native-host frames and
the official MCP client (``python -m bench.system``; see README.md here)."""
