"""Checks of who the fabric's controllers really are and how they are reached (pure).

- ``IB-SM-GUID-MISMATCH``: an SM whose SMInfo claims a GUID other than the port found at
  the LID it answers from (``SmSeen.port_guid``, from discovery). An SM borrowing the
  trusted SM's GUID, or a victim's, is caught here even when its claim is "trusted".
- ``TRANSPORT-INSECURE``: pass-through of what drivers report about their own transport
  when configured below the secure default (SSH ``insecure: true``, UFM over plain http
  or with TLS unverified, OVSDB/OVN ``tcp:`` remotes, Kubernetes ``verify_ssl: false`` or
  ``http://`` off loopback, Fabric Manager over TCP); the service asks every switch, the SM
  and every backend (``transport_notes()``) and feeds them as ``AuditInput.extra_findings``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from gpufabric.audit.index import AuditIndex
from gpufabric.audit.model import AuditInput, Finding
from gpufabric.domain.models import Fabric

TRANSPORT_ID: Final = "TRANSPORT-INSECURE"


def sm_guid_mismatch(inp: AuditInput, idx: AuditIndex) -> Iterator[Finding]:
    """IB-SM-GUID-MISMATCH: an SM answers from one port while claiming another port's GUID."""
    for sm in inp.observed.ib.sms:
        if sm.port_guid is None or sm.port_guid == sm.guid:
            continue
        trusted = " (a trusted SM's GUID)" if sm.guid in inp.trusted_sm_guids else ""
        where = f" on node {sm.node}" if sm.node else ""
        yield Finding(
            f"SM at lid {sm.lid} (port {sm.port_guid}{where}) claims GUID {sm.guid}{trusted} in SMInfo",
            fabric=Fabric.INFINIBAND,
            device=sm.node,
            port=str(sm.port_guid),
            node=sm.node,
            resource=f"lid:{sm.lid}",
        )


def transport_insecure(inp: AuditInput, idx: AuditIndex) -> Iterator[Finding]:
    """TRANSPORT-INSECURE: the extra findings that name this invariant, passed through."""
    for v in inp.extra_findings:
        if v.invariant == TRANSPORT_ID:
            fabric = Fabric(v.fabric) if v.fabric else None
            yield Finding(v.message, fabric=fabric, device=v.device, resource=v.resource, severity=v.severity)
