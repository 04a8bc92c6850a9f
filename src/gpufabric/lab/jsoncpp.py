"""jsoncpp ``StyledWriter`` output (what fmpm prints): keys sorted, three-space indent,
``"key" : value``, short arrays of scalars on one line. Used by the stand-in ``fmpm``."""

from __future__ import annotations

import json
from typing import Any, Final

_INDENT: Final = "   "
_RIGHT_MARGIN: Final = 74


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v)


def _value(v: Any, level: int) -> str:
    pad, inner = _INDENT * level, _INDENT * (level + 1)
    if isinstance(v, dict):
        if not v:
            return "{}"
        items = [f'{inner}{json.dumps(k)} : {_value(v[k], level + 1)}' for k in sorted(v)]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(v, list):
        if not v:
            return "[]"
        if all(not isinstance(x, (dict, list)) for x in v):
            parts = [_scalar(x) for x in v]
            if len(v) * 3 + sum(len(p) for p in parts) < _RIGHT_MARGIN:
                return "[ " + ", ".join(parts) + " ]"
        return "[\n" + ",\n".join(inner + _value(x, level + 1) for x in v) + "\n" + pad + "]"
    return _scalar(v)


def styled(value: Any) -> str:
    """``value`` as jsoncpp's StyledWriter writes it (with the final newline)."""
    return _value(value, 0) + "\n"
