"""The observed state of every fabric at one time, as the core handles it: one opaque slice per
fabric instance, each of the type that instance's :class:`~gpufabric.domain.fabric.FabricKind`
reads, plans and audits (the kinds own their state types, e.g. ``fabrics/ethernet/state.py``).

The same value describes *desired* state previews and *observed* state, so a plan is the
difference of two values and an audit is a check of one observed value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class FabricState:
    """Everything observed on every fabric instance at one time: instance -> its slice."""

    __slots__ = ("_slices",)

    def __init__(self, *, slices: Mapping[str, Any] | None = None) -> None:
        self._slices: dict[str, Any] = dict(slices or {})

    @property
    def slices(self) -> Mapping[str, Any]:
        return dict(self._slices)

    def get(self, fabric: str, default: Any = None) -> Any:
        return self._slices.get(fabric, default)

    def with_slice(self, fabric: str, value: Any) -> FabricState:
        return FabricState(slices={**self._slices, fabric: value})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FabricState) and self._slices == other._slices

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._slices)))

    def __repr__(self) -> str:
        return f"FabricState({', '.join(f'{k}={v!r}' for k, v in sorted(self._slices.items()))})"
