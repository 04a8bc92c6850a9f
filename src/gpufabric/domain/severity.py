"""How bad a finding is: shared by the audit and by drivers that report findings (hardening)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final


class Severity(enum.StrEnum):
    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @property
    def rank(self) -> int:
        """Higher is worse: critical 3, high 2, medium 1, low 0."""
        return _RANK[self]

    @classmethod
    def ordered(cls) -> tuple[Severity, ...]:
        """Worst first."""
        return (cls.CRITICAL, cls.HIGH, cls.MEDIUM, cls.LOW)


_RANK: Final[Mapping[Severity, int]] = {
    Severity.CRITICAL: 3,
    Severity.HIGH: 2,
    Severity.MEDIUM: 1,
    Severity.LOW: 0,
}
