"""Checking a tenant's use against its :class:`~gpufabric.domain.quotas.Quotas` before a write:
networks, live leases (pending grants included) and open moves into the tenant. The counts are
read in the write's own transaction (:func:`gpufabric.store.move_requests.usage`), after the
tenant's quota lock (:func:`~gpufabric.store.move_requests.hold_quota`): what is counted is what
the write sees, and two writers into one tenant, in any processes or replicas on one store,
count one after the other (the second sees the first's rows), so none overshoots. An offer into
a tenant counts only once that tenant accepts it (else an owner could fill another tenant's quota
with offers). An admin is not counted; every other role (service included) is. A refusal tells a
principal of another tenant (an owner's offer) none of the tenant's numbers."""

from __future__ import annotations

from gpufabric.domain.auth import Principal, Role
from gpufabric.domain.errors import QuotaError
from gpufabric.domain.quotas import Quotas
from gpufabric.store.move_requests import hold_quota, usage
from gpufabric.store.tx import Tx


def check(tx: Tx, quotas: Quotas, p: Principal, tenant: str, *what: str, adding: int = 1) -> None:
    """QuotaError (429) naming the first quota of ``what`` that ``adding`` more would pass, counted in ``tx``."""
    if p.role is Role.ADMIN:
        return
    hold_quota(tx, tenant)  # until tx ends: another writer's check of this tenant waits for this one
    for name in what:
        limit = quotas.limit(name)
        have = usage(tx, tenant, name)
        if have + adding > limit and not p.sees_tenant(tenant):  # its count and quota are the tenant's own
            one = {"networks": "network", "leases": "lease", "open_moves": "open move"}.get(name, name)
            raise QuotaError(
                f"quota exceeded: tenant {tenant} cannot take another {one} now (quotas.{name} in config.yaml)",
                field=f"quotas.{name}", value=None, allowed=f"within tenant {tenant}'s quota", tenant=tenant,
            )
        if have + adding > limit:
            raise QuotaError(
                f"quota exceeded: tenant {tenant} holds {have} {name.replace('_', ' ')} of its quota {limit}"
                f" (quotas.{name} in config.yaml)",
                field=f"quotas.{name}", value=have + adding, allowed=f"at most {limit}", tenant=tenant,
            )  # fmt: skip
