"""Fabric Manager's return codes (fmReturn_t), kept free of other imports so that the
stand-in ``fmpm`` starts fast."""

from __future__ import annotations

import enum
from typing import Final


class FmReturn(enum.IntEnum):
    """fmReturn_t of the Fabric Manager SDK."""

    SUCCESS = 0
    BADPARAM = -1
    GENERIC_ERROR = -2
    NOT_SUPPORTED = -3
    UNINITIALIZED = -4
    TIMEOUT = -5
    VERSION_MISMATCH = -6
    IN_USE = -7
    NOT_CONFIGURED = -8
    CONNECTION_NOT_VALID = -9
    NVLINK_ERROR = -10

    @property
    def label(self) -> str:
        return _LABELS[self]

    @classmethod
    def of(cls, code: int) -> FmReturn | None:
        try:
            return cls(code)
        except ValueError:
            return None


_LABELS: Final = {
    FmReturn.SUCCESS: "success",
    FmReturn.BADPARAM: "bad parameter",
    FmReturn.GENERIC_ERROR: "generic error",
    FmReturn.NOT_SUPPORTED: "not supported",
    FmReturn.UNINITIALIZED: "uninitialized (or partition not active)",
    FmReturn.TIMEOUT: "timeout",
    FmReturn.VERSION_MISMATCH: "version mismatch",
    FmReturn.IN_USE: "in use (already active, or a GPU of it is in another active partition)",
    FmReturn.NOT_CONFIGURED: "not configured",
    FmReturn.CONNECTION_NOT_VALID: "connection not valid",
    FmReturn.NVLINK_ERROR: "NVLink error",
}
