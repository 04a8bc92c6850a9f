"""IB-CABLING (issue 31's leftovers, item 3): the audit compares each port's cabling as discovery
sees it (``IbFabricState.cabling``, from the topology the OpenSM driver's observe reads the ports
by: no SMP of its own) with the cabling the import stored, on the recorded output of the lab's
fabric (6 nodes x 2 HCAs + the SM host): a recabled HCA, and a GUID seen where another node's
port is cabled (a spoofed GUID), are findings naming the stored node."""

from __future__ import annotations

import re
from pathlib import Path

from gpufabric.domain.hooks import ImportRequest
from gpufabric.domain.models import Node
from gpufabric.domain.severity import Severity
from gpufabric.domain.tenancy import Tenancy
from gpufabric.fabrics.infiniband.audit.index import IbAudit
from gpufabric.fabrics.infiniband.audit.invariants import INVARIANTS, violations
from gpufabric.fabrics.infiniband.drivers.opensm.observe import cabling, observe_fabric
from gpufabric.fabrics.infiniband.drivers.opensm.smpread import SmpQuery
from gpufabric.fabrics.infiniband.inventory.importer import import_format
from gpufabric.fabrics.infiniband.readers.diags import PkeyDump, PortInfo
from gpufabric.fabrics.infiniband.readers.ibnetdiscover import ca_ports, parse_ibnetdiscover
from gpufabric.fabrics.infiniband.state import IbFabricState

RECORDED = Path(__file__).parents[3] / "fixtures" / "ibnetdiscover"
TOPO = (RECORDED / "lab-6x2-sm.topology.txt").read_text()  # what the import stored
PORTS = (RECORDED / "lab-6x2-sm.ports.txt").read_text()  # what the driver's observe reads (ibnetdiscover -p)
LEAF_01 = "0x0002c90330000001"
LEAF_02 = "0x0002c90330000002"
A01_1 = "0x0002c90310000111"  # "gpu-a01 mlx5_1", stored on leaf-01 port 2
A02_1 = "0x0002c90310000211"  # "gpu-a02 mlx5_1", stored on leaf-01 port 4


def stored() -> tuple[Node, ...]:
    """The nodes as ``inventory import --format ibnetdiscover`` of the recorded output stores them."""
    return import_format().read(ImportRequest(TOPO, lambda: ())).inventory.nodes


def cabling_findings(text: str) -> list[tuple[str, str, str, str]]:
    observed = IbFabricState(cabling=cabling(list(ca_ports(parse_ibnetdiscover(text)).values())))
    nodes = stored()
    audit = IbAudit.build(Tenancy(nodes, dict.fromkeys(n.name for n in nodes), {}), None, observed)
    return [(v.port, v.node, v.resource, v.message) for v in violations(audit) if v.invariant == "IB-CABLING"]


def recable(text: str, guid: str, to: int) -> str:
    """The port ``guid`` found on leaf-01 port ``to`` instead (both ends of the link, as
    ``ibnetdiscover -p`` prints them)."""
    ca = re.compile(rf"^(CA +\d+ +\d+ {guid} .* - SW +\d+) +\d+( {LEAF_01} )", re.M)
    sw = re.compile(rf"^(SW +\d+) +\d+( {LEAF_01} .* - CA +\d+ +\d+ {guid} )", re.M)
    out, n = ca.subn(rf"\g<1> {to:2d}\g<2>", text)
    out, m = sw.subn(rf"\g<1> {to:2d}\g<2>", out)
    assert (n, m) == (1, 1), guid
    return out


def test_the_observed_state_carries_each_ports_cabling_and_matches_what_was_stored() -> None:
    observed = cabling(list(ca_ports(parse_ibnetdiscover(PORTS)).values()))
    assert len(observed) == 13 and {str(c.switch_guid) for c in observed} == {LEAF_01, LEAF_02}
    assert cabling_findings(PORTS) == []
    spec = next(s for s in INVARIANTS if s.id == "IB-CABLING")
    assert spec.severity == Severity.HIGH.value


def test_a_recabled_hca_is_reported_on_its_stored_node() -> None:
    ((port, node, resource, message),) = cabling_findings(recable(PORTS, A01_1, 9))
    assert (port, node, resource) == (A01_1, "gpu-a01", f"cable:{LEAF_01}/9")
    assert f"seen on switch {LEAF_01} port 9; stored on switch {LEAF_01} port 2" in message


def test_a_guid_seen_where_another_nodes_port_is_cabled_names_both() -> None:
    """gpu-a01's HCA GUID answers on the cable stored for gpu-a02's, and the other way round (two
    hosts swapped their GUIDs, or one spoofs the other's)."""
    swapped = recable(recable(PORTS, A01_1, 4), A02_1, 2)
    found = {(p, n): (r, m) for p, n, r, m in cabling_findings(swapped)}
    assert set(found) == {(A01_1, "gpu-a01"), (A02_1, "gpu-a02")}
    resource, message = found[(A01_1, "gpu-a01")]
    assert resource == f"cable:{LEAF_01}/4" and "where node gpu-a02's port is stored" in message
    assert "where node gpu-a01's port is stored" in found[(A02_1, "gpu-a02")][1]


class Recorded:
    """An SmpReader answering every port with the default partition and no SM (no SMP sent)."""

    def __init__(self) -> None:
        self.queries: list[SmpQuery] = []

    def read(self, queries: list[SmpQuery]) -> list[object]:
        self.queries.extend(queries)
        return [
            PkeyDump((0x7FFF,), 32) if q.op == "pkeys" else PortInfo(q.lid, 0, 0, "Active", "LinkUp") for q in queries
        ]

    def close(self) -> None:
        pass


def test_observe_carries_the_topologys_cabling_without_an_smp_of_its_own() -> None:
    reader = Recorded()
    state = observe_fabric(reader, ca_ports(parse_ibnetdiscover(recable(PORTS, A01_1, 9))))  # type: ignore[arg-type]
    assert {q.op for q in reader.queries} == {"pkeys", "portinfo"} and len(reader.queries) == 2 * 13
    seen = {str(c.port_guid): (str(c.switch_guid), c.switch_port) for c in state.cabling}
    assert seen[A01_1] == (LEAF_01, 9) and seen[A02_1] == (LEAF_01, 4) and len(seen) == 13


def test_without_observed_cabling_nothing_is_compared() -> None:
    """A driver that reads no cabling (UFM today) leaves ``cabling`` empty: no finding."""
    nodes = stored()
    audit = IbAudit.build(Tenancy(nodes, dict.fromkeys(n.name for n in nodes), {}), None, IbFabricState())
    assert [v for v in violations(audit) if v.invariant == "IB-CABLING"] == []
