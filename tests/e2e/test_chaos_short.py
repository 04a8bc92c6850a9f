"""A short fault campaign (issue 35) on the lab with one ``gpufabric serve``: a workload of moves,
leases and cancels through the API while a seeded nemesis kills serve (-9), the lab's ovsdb-server
and OpenSM, and restarts a Fabric Manager stand-in; the independent checker (tests/chaos/checker.py)
samples OVS, the PKey tables by SMP and fmpm the whole time. No node is ever in two tenants, every
requested move ends (done, failed in quarantine, or cancelled), none lost or duplicated, and every
fault converges. The seed comes from ``GPUFABRIC_CHAOS_SEED`` or the clock and is printed; a failure
prints the seed and the fault timeline (replay: ``python tests/chaos/campaign.py --seed N``)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from chaos.campaign import Server, report, run_campaign, violations
from chaos.checker import Inventory, Segments, owners, splits
from chaos.readers import FabricReader
from gpufabric.lab.serve import free_port

from e2e.conftest import LabEnv

# Not yet a gate of make test: one checker read-order flake in its first 9 runs (fixed: seed 319381),
# 3 passes since; it runs with make test-full or GPUFABRIC_CHAOS=1 until more runs back it.
_CHAOS = os.environ.get("GPUFABRIC_TEST_FULL") == "1" or os.environ.get("GPUFABRIC_CHAOS") == "1"
LAB_NODES = 4
DURATION = float(os.environ.get("GPUFABRIC_CHAOS_SECONDS", "120"))  # make chaos: CHAOS_SECONDS (1800)
pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.timeout(int(DURATION) + 900),
              pytest.mark.skipif(not _CHAOS, reason="the short fault campaign: make test-full or GPUFABRIC_CHAOS=1")]  # fmt: skip


def test_short_campaign_no_split_no_lost_move(lab: LabEnv, tmp_path_factory: pytest.TempPathFactory) -> None:
    seed = int(os.environ.get("GPUFABRIC_CHAOS_SEED") or 0) or int(time.time()) % 1_000_000
    print(f"\nchaos seed {seed} (GPUFABRIC_CHAOS_SEED={seed} replays it)")
    token = lab.gfj("token", "create", "--role", "admin", "--name", "chaos")["secret"]
    log = (tmp_path_factory.mktemp("chaos") / "serve.log").open("w")
    server = Server(lab.env, free_port(), ["--interval", "5", "--window", "0.1", "--worker-poll", "0.5",
                                           "--heartbeat", "0.5"], log)  # fmt: skip
    server.start()
    try:
        r = run_campaign(lab.status, server, token, seed, DURATION, mean_gap=15.0)
    finally:
        server.stop()
        log.close()
    print(report(r))
    assert sum(r["faults"].values()) >= 3 and r["moves_requested"] >= 10 and r["sampler_rounds"] >= 20, report(r)
    assert violations(r) == [], report(r)
    assert_the_checker_sees_a_real_split(lab)


def assert_the_checker_sees_a_real_split(lab: LabEnv) -> None:
    """The checker can fail on the real fabric: a node's access port made to trunk both tenants'
    VLANs (by ovs-vsctl, behind gpufabric's back) is a split in the next sample; then put back."""
    inv = Inventory.from_status(lab.status)
    seg = Segments.from_networks(lab.gfj("network", "list"))
    node = inv.nodes[0]
    port = node.eth_ports[0]
    db = f"--db=unix:{lab.status['ovsdb_socket']}"
    tag = lab.ovs_tag(port)
    vlans = ",".join(str(v) for v in sorted(seg.vlans)[:2])
    subprocess.run(
        ["ovs-vsctl", db, "set", "port", port, f"trunks={vlans}", "--", "clear", "port", port, "tag"], check=True
    )
    try:
        found = splits(owners(FabricReader(inv).sample(), inv, seg))
    finally:
        subprocess.run(["ovs-vsctl", db, "clear", "port", port, "trunks"], check=True)
        if tag is not None:
            lab.ovs_set_tag(port, tag)
    assert len(found) == 1 and found[0].startswith(f"{node.name} in ['alpha', 'beta']"), found
