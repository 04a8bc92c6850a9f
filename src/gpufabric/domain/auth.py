"""Principals and roles (as in ESI): who is calling, and what each role may do.

``admin`` may do everything. ``service`` is an integration's token (the Neutron ML2 driver,
the esi-leap sync): it sees every tenant and may create tenants, adopt networks with explicit
segments, attach/detach nodes, grant leases the OpenStack side decided and read the worker
status (``GET /reconcile``: a same-tenant attach is bound only after its converge), but not import
inventory, set owners, request moves, run audits or manage tokens. ``owner`` (of a tenant T) sees the nodes T owns and may lease
them out and end those leases. ``lessee`` (of a tenant T) sees and acts only on the nodes
T leases now, T's networks, leases and moves; anything else does not exist for it (404).
A verb a role lacks is ForbiddenError (403). The CLI acting directly on the store is the
local operator's admin principal (:data:`LOCAL_ADMIN`). Pure: no I/O.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from gpufabric.domain.errors import ForbiddenError, ValidationError


class Role(enum.StrEnum):
    ADMIN = "admin"
    OWNER = "owner"
    LESSEE = "lessee"
    SERVICE = "service"


class Verb(enum.StrEnum):
    """What a call does, per resource kind (the authorization matrix is over these)."""

    READ = "read"
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    ACT = "act"  # run (audit), move, attach, revoke ...


# resource -> verb -> roles allowed (visibility of single objects is checked separately)
_MATRIX: Final[dict[str, dict[Verb, frozenset[Role]]]] = {
    "node": {
        Verb.READ: frozenset(Role),
        Verb.CREATE: frozenset({Role.ADMIN}),
        Verb.ACT: frozenset({Role.ADMIN, Role.LESSEE, Role.SERVICE}),  # attach/detach networks
    },
    "tenant": {
        Verb.READ: frozenset(Role),
        Verb.CREATE: frozenset({Role.ADMIN, Role.SERVICE}),
        Verb.DELETE: frozenset({Role.ADMIN}),
    },
    "network": {
        Verb.READ: frozenset(Role),
        Verb.CREATE: frozenset(Role),
        Verb.UPDATE: frozenset(Role),  # its name, description and tags (not its segments)
        Verb.DELETE: frozenset(Role),
    },
    "offering": {Verb.READ: frozenset(Role)},
    "lease": {
        Verb.READ: frozenset(Role),
        Verb.CREATE: frozenset({Role.ADMIN, Role.OWNER, Role.SERVICE}),
        Verb.DELETE: frozenset(Role),
    },
    "move": {
        Verb.READ: frozenset(Role),
        Verb.CREATE: frozenset({Role.ADMIN}),
    },
    "offer": {Verb.ACT: frozenset({Role.ADMIN, Role.OWNER, Role.LESSEE})},  # accept/decline a lease offered into one's tenant
    "audit": {Verb.READ: frozenset({Role.ADMIN}), Verb.ACT: frozenset({Role.ADMIN})},
    "reconcile": {Verb.READ: frozenset({Role.ADMIN, Role.SERVICE})},  # the Neutron driver waits on the worker
    "event": {Verb.READ: frozenset(Role)},
    "token": {
        Verb.READ: frozenset({Role.ADMIN}),
        Verb.CREATE: frozenset({Role.ADMIN}),
        Verb.DELETE: frozenset({Role.ADMIN}),
    },
}


@dataclass(frozen=True)
class Principal:
    """Who makes a call: a name (token name or local user), a role, and its tenant (owner, lessee)."""

    name: str
    role: Role
    tenant: str | None = None

    def __post_init__(self) -> None:
        role = Role(self.role)
        object.__setattr__(self, "role", role)
        if role in (Role.ADMIN, Role.SERVICE):
            if self.tenant is not None:
                raise ValidationError("principal.tenant", self.tenant, f"none for the {role.value} role")
        else:
            if self.tenant is None:
                raise ValidationError("principal.tenant", None, f"a tenant name for the {role.value} role")
            from gpufabric.domain.values import check_name  # here: a command through --api never loads values

            check_name("principal.tenant", self.tenant)

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN

    @property
    def sees_all(self) -> bool:
        """Sees every tenant's objects (admin, and an integration's service token)."""
        return self.role in (Role.ADMIN, Role.SERVICE)

    def may(self, resource: str, verb: Verb) -> bool:
        return self.role in _MATRIX.get(resource, {}).get(verb, frozenset())

    def require(self, resource: str, verb: Verb) -> None:
        """ForbiddenError unless the role has ``verb`` on ``resource``."""
        if not self.may(resource, verb):
            raise ForbiddenError(
                f"role {self.role.value} may not {verb.value} {resource}s",
                field="role",
                value=self.role.value,
                allowed=", ".join(sorted(r.value for r in _MATRIX.get(resource, {}).get(verb, frozenset()))) or "none",
            )

    def sees_tenant(self, tenant: str | None) -> bool:
        """Objects of ``tenant`` are visible (admin: all; others: their own tenant only)."""
        return self.sees_all or (tenant is not None and tenant == self.tenant)

    def to_dict(self) -> dict[str, str | None]:
        return {"name": self.name, "role": self.role.value, "tenant": self.tenant}


LOCAL_ADMIN: Final = Principal("local-operator", Role.ADMIN)
"""The principal of the CLI acting directly on the store."""


def matrix() -> dict[str, dict[str, list[str]]]:
    """The role matrix, for documentation and the authorization test."""
    return {r: {v.value: sorted(x.value for x in roles) for v, roles in vs.items()} for r, vs in _MATRIX.items()}
