"""The v1 model of a network's update (``PATCH /networks/{tenant}/{name}``): what may change (its
name, description and tags) and what stays as the network was created (a 422 naming it)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

from gpufabric.api.v1.schemas import Description, Name, Tags

FIXED_NETWORK_FIELDS = ("tenant", "segments", "fabrics", "options")
"""What a network keeps for life: a PATCH naming one is refused naming it."""


class NetworkPatch(BaseModel):
    """A network's changes: any of its name, description and tags (absent: unchanged). Its tenant,
    segments, fabrics and options are not updatable (a PATCH naming one is a 422 naming it)."""

    model_config = ConfigDict(extra="forbid")

    name: Name | None = None
    description: Description | None = None
    tags: Tags | None = None
    tenant: SkipJsonSchema[Any] = None
    segments: SkipJsonSchema[Any] = None
    fabrics: SkipJsonSchema[Any] = None
    options: SkipJsonSchema[Any] = None

    @field_validator(*FIXED_NETWORK_FIELDS, mode="before")
    @classmethod
    def _fixed(cls, v: Any, info: ValidationInfo) -> Any:
        raise PydanticCustomError("not_updatable", f"not updatable ({info.field_name} is fixed when the network is "
                                  "created; its name, description and tags are updatable)")  # fmt: skip
