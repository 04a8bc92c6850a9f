"""The one error tree of gpufabric.

Every error carries structured fields (``fields``) next to its one-line message so that
the CLI can print one clear line and ``--json`` can print the fields. Code raises; it
never swallows.
"""

from __future__ import annotations

from typing import Any


class GpufabricError(Exception):
    """Root of every error gpufabric raises on purpose."""

    code = "error"

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields: dict[str, Any] = fields

    def to_json(self) -> dict[str, Any]:
        """The one error shape of the CLI ``--json`` (local and ``--api``) and of the API:
        ``{"error": {code, field, value, allowed, message}}``, and ``details`` with the error's
        other fields (``move``, ``tenants``, ``failsafe``, ...) when it has any."""
        f = self.fields
        body: dict[str, Any] = {
            "error": {
                "code": self.code,
                "field": f.get("field") or f.get("kind"),
                "value": _short(f.get("value", f.get("name"))),
                "allowed": f.get("allowed"),
                "message": self.message,
            }
        }
        details = {k: _jsonable(v) for k, v in f.items() if k not in _SHAPED}
        return {**body, "details": details} if details else body

    to_dict = to_json


_SHAPED = frozenset({"field", "kind", "value", "name", "allowed"})


def _short(v: Any) -> Any:
    """A value as it goes in an error: as is when a number, else at most 200 characters."""
    if v is None or isinstance(v, (bool, int, float)):
        return v
    text = str(v)
    return text if len(text) <= 200 else text[:200] + "..."


def _jsonable(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return str(v)


class ValidationError(GpufabricError, ValueError):
    """A value is outside what is allowed. Names the field and the allowed range."""

    code = "invalid"

    def __init__(self, field: str, value: Any, allowed: str, reason: str | None = None) -> None:
        why = f" ({reason})" if reason else ""
        shown = repr(value)
        if len(shown) > 80:  # one readable line even for hostile input (e.g. 5,000 characters)
            shown = f"{shown[:60]}... ({len(str(value))} chars)"
        super().__init__(f"invalid {field}: {shown}{why}; allowed: {allowed}", field=field, value=value, allowed=allowed)
        self.field = field
        self.value = value
        self.allowed = allowed


class ConfigError(ValidationError):
    """Configuration (pools, mappings, driver settings) is inconsistent."""

    code = "config"


class NotFoundError(GpufabricError, LookupError):
    code = "not_found"

    def __init__(self, kind: str, name: str) -> None:
        super().__init__(f"{kind} not found: {name}", kind=kind, name=name)
        self.kind = kind
        self.name = name


class ConflictError(GpufabricError):
    """The request contradicts the current state (already leased, already exists, ...)."""

    code = "conflict"


class ExhaustedError(GpufabricError):
    """A pool has no free value left."""

    code = "exhausted"


class FabricError(GpufabricError):
    """A fabric (switch, SM, manager) failed or disagreed."""

    code = "fabric"

    def __init__(self, message: str, *, fabric: str, device: str = "", **fields: Any) -> None:
        super().__init__(message, fabric=fabric, device=device, **fields)
        self.fabric = fabric
        self.device = device


class CapacityError(FabricError):
    """A plan would exceed a device limit (e.g. PKey table size of a port)."""

    code = "capacity"


class ApplyError(FabricError):
    code = "apply"


class VerifyError(FabricError):
    """Reading the fabric back did not show the desired state in time."""

    code = "verify"


class LabError(GpufabricError):
    """The local lab (ibsim, OpenSM, OVS, namespaces) could not be brought up or down."""

    code = "lab"


class UnauthorizedError(GpufabricError):
    """No principal: the call carries no valid token (HTTP 401)."""

    code = "unauthorized"


class ForbiddenError(GpufabricError):
    """The principal's role lacks this verb (HTTP 403). Objects it may not see are NotFoundError (404)."""

    code = "forbidden"


class UnavailableError(GpufabricError):
    """A dependency the call needs is not there (no fabrics configured, store down) (HTTP 503)."""

    code = "unavailable"


class QuotaError(GpufabricError):
    """A tenant's quota (networks, leases, open moves) or a principal's write rate is used up (HTTP 429)."""

    code = "quota"
