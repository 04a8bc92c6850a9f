"""A move's read of the DPU fabric runs no ``dpctl/dump-flows`` / ``tc`` on any DPU; the audit's
read does, and sees the datapath flows it checks for leftovers (real OVN lab + real sshd, the
offload source read over SSH on the DPU's Arm side: the runner counts every command it ran)."""

from __future__ import annotations

from dataclasses import replace

from gpufabric.engine.fabrics import Fabrics
from gpufabric.fabrics.dpu.kind import DpuKind

from fabrics.dpu.functional.test_dpu_offload_ssh import NODE, World, _traffic, world  # noqa: F401  (the fixture)


def test_a_moves_observe_reads_no_flows_and_the_audits_does(world: World) -> None:  # noqa: F811
    b = world.backend(world.ssh())
    fabrics = Fabrics(kinds={"dpu": DpuKind().bind("dpu")}, backends={"dpu": b})
    runner = b.offload_ssh[NODE]
    try:
        _traffic(world)
        moving = fabrics.observe(audit=False)  # what MoveEngine.known_state reads
        assert runner.commands == 0  # no dpctl/dump-flows, no tc: nothing ran on the DPU
        assert moving.get("dpu").flows == frozenset() and moving.get("dpu").ports  # the rest was read
        for _ in range(3):  # flows may expire (idle) between the ping and the read
            _traffic(world)
            full = fabrics.observe()  # what the audit (and the reconcile pass it audits) reads
            if full.get("dpu").flows:
                break
        assert runner.commands >= 2  # dump-flows + tc per bound representor, over SSH
        assert (NODE, "acme") in full.get("dpu").flows
        assert replace(full.get("dpu"), flows=frozenset()) == moving.get("dpu")  # the same read, less the flows
    finally:
        b.close()
