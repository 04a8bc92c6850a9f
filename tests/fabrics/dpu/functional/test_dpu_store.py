"""DPU pairing facts (``Dpu.details``) survive the store: imported, written, read back, and a
change to them alone is an update."""

from __future__ import annotations

from gpufabric.domain.models import Inventory, Node
from gpufabric.fabrics.dpu.entries import Dpu, DpuMode, dpu_ports
from gpufabric.fabrics.dpu.entries.info import DpuInfo, node_dpus
from gpufabric.store.core import Store


def test_dpu_details_round_trip(store_url: str) -> None:
    details = (("mgmt_vf", "ens1f0v0"), ("pf", "ens1f0"), ("representors", "pf0vf1,pf0vf2"), ("vfs", "16"))
    n = Node("gpu-a01", fabric_ports=dpu_ports(Dpu("gpu-a01", "bf0", DpuMode.DPU, details)))
    s = Store.open(store_url)
    try:
        s.upsert_inventory(Inventory((n,)))
        got = s.node("gpu-a01")
        assert node_dpus(got) == node_dpus(n) == (Dpu("gpu-a01", "bf0", DpuMode.DPU, details),)
        assert DpuInfo.from_dpu(node_dpus(got)[0]).representors == ("pf0vf1", "pf0vf2")
        changed = Node("gpu-a01", fabric_ports=dpu_ports(Dpu("gpu-a01", "bf0", DpuMode.DPU, (*details[:3], ("vfs", "8")))))
        result = s.upsert_inventory(Inventory((changed,)))
        assert result.unchanged == 0
        assert dict(node_dpus(s.node("gpu-a01"))[0].details)["vfs"] == "8"
    finally:
        s.close()
