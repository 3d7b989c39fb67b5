"""The JSON schemas ``tools/list`` publishes, without what costs a model's context and
says nothing: pydantic's generated ``title`` of every property and model, ``anyOf``
with ``null`` for optional parameters (an optional parameter is one that is not
``required``), ``default: null``, ``default: false`` (a flag is off unless given) and
``minLength: 0``. Validation is unaffected: the SDK validates
arguments with the pydantic model, not with the published schema."""

from __future__ import annotations

from typing import Any

__all__ = ["compact_schema"]

_NULL = {"type": "null"}


def compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without titles, null alternatives and null defaults."""
    return _compact(schema, top=True)


def _compact(node: Any, top: bool = False) -> Any:
    if isinstance(node, list):
        return [_compact(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "default" and (value is None or value is False):
            continue
        if key == "minLength" and value == 0:
            continue
        if key in ("properties", "$defs") and isinstance(value, dict):
            out[key] = {name: _compact(sub) for name, sub in value.items()}
        else:
            out[key] = _compact(value)
    options = out.get("anyOf")
    if isinstance(options, list) and _NULL in options:
        rest = [option for option in options if option != _NULL]
        del out["anyOf"]
        if len(rest) == 1 and isinstance(rest[0], dict):
            merged = {**rest[0], **out}
            return merged
        out["anyOf"] = rest
    return out
