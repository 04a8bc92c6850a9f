"""The InfiniBand audit of shared hosts (issue 33, pure): ``IB-SLOT-FOREIGN-PKEY`` and
``IB-SLOT-SHARED-HCA``, on the *observed* PKey tables of a shared host's HCA ports.

On a shared host each HCA port is the rail of one GPU (its ``gpu``), handed to the VM of the
slot holding that GPU: it may hold only PKeys of that slot's tenant. An HCA port of a slot
holding a PKey of a tenant that holds no slot with that GPU (a port without affinity, or of a
GPU no slot holds: any tenant PKey) is ``IB-SLOT-FOREIGN-PKEY``; one HCA port holding PKeys of
two tenants is ``IB-SLOT-SHARED-HCA`` (two VMs of two tenants on one rail). Other hosts are
``IB-GUID-FOREIGN-PKEY``'s (:mod:`.invariants`), which leaves shared hosts to these two."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from gpufabric.domain.fabric import InvariantSpec
from gpufabric.domain.findings import Violation
from gpufabric.domain.models import QUARANTINE
from gpufabric.domain.severity import Severity
from gpufabric.fabrics.infiniband.audit.index import UNOWNED, IbAudit, fmt_pkeys
from gpufabric.fabrics.infiniband.entries import KIND
from gpufabric.fabrics.infiniband.plan import port_unit

FOREIGN: Final = "IB-SLOT-FOREIGN-PKEY"
SHARED_HCA: Final = "IB-SLOT-SHARED-HCA"
SPECS: Final = (
    InvariantSpec(FOREIGN, Severity.CRITICAL.value,
                  "On a shared host, an HCA port holds a PKey of a tenant that holds no slot with the port's GPU "
                  "(or the port has no GPU affinity: the hypervisor's, in quarantine)."),
    InvariantSpec(SHARED_HCA, Severity.CRITICAL.value,
                  "On a shared host, one HCA port holds PKeys of two or more tenants (two slots' tenants on one rail)."),
)  # fmt: skip


def slot_violations(a: IbAudit) -> Iterator[Violation]:
    """Both checks, over the observed tables of the shared hosts' ports."""
    if not a.shared:
        return
    for guid, device, node, tenant, _, keys, _ in a.rows():
        if node not in a.shared or not keys:
            continue
        port = a.ib_ports[guid.value]
        owners = {pk: a.owner_set(pk) for pk in keys}
        tenants = sorted({o for os in owners.values() for o in os} - {UNOWNED})
        unit = port_unit(a.tenancy, port)
        rail = f"GPU {port.gpu}" if port.gpu is not None else "no GPU affinity"
        where = f"HCA {device}/{port.port_num} {guid} of shared host {node} ({rail}, {_slot(unit, tenant)})"
        foreign = sorted(pk for pk, os in owners.items() if tenant not in os)
        if foreign:
            who = sorted({o for pk in foreign for o in owners[pk]})
            why = ("which holds no slot with that GPU" if port.gpu is not None else
                   "an HCA without GPU affinity is the hypervisor's and holds no tenant PKey")  # fmt: skip
            yield Violation(FOREIGN, Severity.CRITICAL,
                            f"{where} holds pkey(s) {fmt_pkeys(foreign)} of {', '.join(who)}: {why}",
                            KIND, device, str(guid), unit or node, tuple(sorted({tenant, *who})),
                            f"pkey:{fmt_pkeys(foreign)}")  # fmt: skip
        if len(tenants) > 1:
            yield Violation(SHARED_HCA, Severity.CRITICAL,
                            f"{where} holds pkeys {fmt_pkeys(keys)} of tenants {', '.join(tenants)}",
                            KIND, device, str(guid), unit or node, tuple(tenants), f"pkey:{fmt_pkeys(keys)}")  # fmt: skip


def _slot(unit: str | None, tenant: str) -> str:
    if unit is None or tenant == QUARANTINE:
        return f"slot {unit}, in quarantine" if unit else "no slot: quarantine"
    return f"slot {unit} of tenant {tenant}"
