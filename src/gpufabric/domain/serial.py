"""JSON form of domain values: dataclasses to dicts, ids to canonical strings, times to ISO 8601."""

from __future__ import annotations

import dataclasses
import enum
import sys
from datetime import datetime
from typing import Any


def jsonable(obj: Any) -> Any:
    """Domain values to JSON: dataclasses to dicts, ids to their canonical strings."""
    values = sys.modules.get("gpufabric.domain.values")  # no id can exist before its module loads: a
    if values is not None:  # command through --api prints JSON without compiling the port patterns
        if isinstance(obj, (values.Guid, values.PKey)):
            return str(obj)
        if isinstance(obj, (values.VlanId, values.ModuleId, values.NvlinkPartitionId)):
            return obj.value
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, datetime):
        return obj.isoformat()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonable(x) for x in obj]
    return obj
