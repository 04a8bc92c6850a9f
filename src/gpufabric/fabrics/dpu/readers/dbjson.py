"""Pure parser of ``ovs-vsctl``/``ovn-nbctl --format=json list`` output (OVSDB JSON values)."""

from __future__ import annotations

import json
from typing import Any

from gpufabric.domain.errors import ValidationError


def _value(v: Any) -> Any:
    """OVSDB JSON value -> Python: ``["map", [[k, v]...]]`` -> dict, ``["set", [...]]`` -> list,
    ``["uuid", u]`` -> u, atoms as they are."""
    if isinstance(v, list) and len(v) == 2 and isinstance(v[0], str):
        tag, body = v
        if tag == "map":
            return {str(k): _value(x) for k, x in body}
        if tag == "set":
            return [_value(x) for x in body]
        if tag in ("uuid", "named-uuid"):
            return body
    return v


def parse_list_json(text: str) -> list[dict[str, Any]]:
    """Rows of one ``--format=json list`` output as dicts keyed by heading."""
    try:
        doc = json.loads(text)
        headings = doc["headings"]
        return [{h: _value(v) for h, v in zip(headings, row, strict=True)} for row in doc["data"]]
    except (ValueError, KeyError, TypeError) as e:
        raise ValidationError("ovsdb list output", text[:120], '{"headings": [...], "data": [[...]]}', str(e)) from None


def as_set(v: Any) -> list[Any]:
    """A set column: one atom is printed bare, several as a list."""
    return v if isinstance(v, list) else [v]
