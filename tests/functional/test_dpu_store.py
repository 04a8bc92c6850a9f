"""DPU pairing facts (``Dpu.details``) survive the store: imported, written, read back, and a
change to them alone is an update."""

from __future__ import annotations

from gpufabric.domain.models import Dpu, DpuMode, Inventory, Node
from gpufabric.fabrics.dpu.info import DpuInfo
from gpufabric.store.core import Store


def test_dpu_details_round_trip(store_url: str) -> None:
    details = (("mgmt_vf", "ens1f0v0"), ("pf", "ens1f0"), ("representors", "pf0vf1,pf0vf2"), ("vfs", "16"))
    n = Node("gpu-a01", dpus=(Dpu("gpu-a01", "bf0", DpuMode.DPU, details),))
    s = Store.open(store_url)
    try:
        s.upsert_inventory(Inventory((n,)))
        got = s.node("gpu-a01")
        assert got.dpus == n.dpus
        assert DpuInfo.from_dpu(got.dpus[0]).representors == ("pf0vf1", "pf0vf2")
        changed = Node("gpu-a01", dpus=(Dpu("gpu-a01", "bf0", DpuMode.DPU, (*details[:3], ("vfs", "8"))),))
        result = s.upsert_inventory(Inventory((changed,)))
        assert result.unchanged == 0
        assert dict(s.node("gpu-a01").dpus[0].details)["vfs"] == "8"
    finally:
        s.close()
