"""Checking a tenant's use against its :class:`~gpufabric.domain.quotas.Quotas` before a write:
networks, live leases (pending grants included) and open moves into the tenant. The counts are
read in the write's own transaction (:func:`gpufabric.store.move_requests.usage`), so what is
counted is what the write sees. An offer into a tenant counts only once that tenant accepts it
(else an owner could fill another tenant's quota with offers). An admin is not counted; every
other role (service included) is."""

from __future__ import annotations

from gpufabric.domain.auth import Principal, Role
from gpufabric.domain.errors import QuotaError
from gpufabric.domain.quotas import Quotas
from gpufabric.store.move_requests import usage
from gpufabric.store.tx import Tx


def check(tx: Tx, quotas: Quotas, p: Principal, tenant: str, *what: str, adding: int = 1) -> None:
    """QuotaError (429) naming the first quota of ``what`` that ``adding`` more would pass, counted in ``tx``."""
    if p.role is Role.ADMIN:
        return
    for name in what:
        limit = quotas.limit(name)
        have = usage(tx, tenant, name)
        if have + adding > limit:
            raise QuotaError(
                f"quota exceeded: tenant {tenant} holds {have} {name.replace('_', ' ')} of its quota {limit}"
                f" (quotas.{name} in config.yaml)",
                field=f"quotas.{name}", value=have + adding, allowed=f"at most {limit}", tenant=tenant,
            )  # fmt: skip
