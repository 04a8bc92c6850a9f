"""``gpufabric site check`` for NVLink: every node's Fabric Manager answers ``fmpm`` (its
partitions and GPUs read), and every inventory node with GPUs has an ``nvlink.options.fm``
entry (a node without one could never be isolated on NVLink)."""

from __future__ import annotations

from typing import Any

from gpufabric.domain.site_check import CheckLevel, SiteCheck, SiteContext, device_check, transport_checks
from gpufabric.fabrics.nvlink.entries import node_gpus


def nvlink_site_checks(driver: Any, ctx: SiteContext) -> list[SiteCheck]:
    def one(node: str) -> SiteCheck:
        return device_check("NVLINK-REACH", node, lambda: driver.read_node(node),
                            f"Fabric Manager of {node} (fabrics.yaml nvlink.options.fm.{node})")  # fmt: skip

    out: list[SiteCheck] = list(driver._parallel(driver.fm, one).values())
    out += transport_checks("NVLINK-TRANSPORT", "fabrics.yaml nvlink", driver)
    for n in ctx.nodes:
        if (gpus := node_gpus(n)) and n.name not in driver.fm:
            out.append(SiteCheck("NVLINK-INVENTORY", CheckLevel.ERROR, f"inventory node {n.name} has {len(gpus)} "
                                 f"GPU(s) but no fabrics.yaml nvlink.options.fm.{n.name} entry", n.name))  # fmt: skip
    return out
