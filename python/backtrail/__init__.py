"""Backtrail: a local-first memory of what you read, shared with your AI assistants."""

__version__ = "0.1.0"
