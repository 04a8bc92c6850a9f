"""The ``fabrics.yaml`` of a running lab: one OVSDB driver per leaf bridge and the OpenSM
driver of the trusted SM (partitions.conf, pid file, log, and the umad2sim environment to
read PKey tables by SMP as the SM node). ``gpufabric lab up`` writes it next to the store.

A lab with the SM pair (``lab up --sm-pair``) gets the pair's options instead
(:meth:`~gpufabric.lab.smpair.SmPair.driver_options`): ``sm_hosts`` for sm-01 and sm-02, each
over its sshd, so every write goes to both SMs and the master is found by SMInfo; both SMs'
port GUIDs are trusted and full members of the default partition.

A lab with two subnets (``lab up --ib-subnets 2``, lab/subnets.py) gets, in place of the one
``infiniband:`` section, two instances in ``fabrics:``, ``ib-compute`` and ``ib-storage``, each
the OpenSM driver of its own subnet with its own ``trusted_sm_guids`` (its SM, or its pair);
the top-level ``sm_port_guids`` / ``trusted_sm_guids`` list every subnet's SMs.

A lab with VM hosts (``lab up --vm-hosts``) lists each one's hypervisor bridge ``hv-<node>`` as an
Ethernet switch too, over its own OVSDB socket, its uplink the node's leaf (lab/vmhost.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from gpufabric.domain.values import Guid
from gpufabric.lab.lab import Lab, LabStatus
from gpufabric.lab.labib import fabric, pair
from gpufabric.lab.subnets import ONE_SUBNET, SubnetStatus, spec_of
from gpufabric.lab.vmhost import hv_bridge, hv_ovs


def ib_section(lab: Lab, sub: SubnetStatus) -> tuple[dict[str, Any], list[str]]:
    """One subnet's OpenSM driver section and its SMs' port GUIDs."""
    spec = spec_of(sub.instance)
    fab = fabric(lab.dir, lab.prefix, None, spec)
    sms = [h.port_guid for h in sub.sm_pair.hosts] if sub.sm_pair else [sub.sm_port_guid]
    if sub.sm_pair:
        ib = pair(lab.dir, fab, spec).driver_options(sub.sm_node, Guid.parse(sub.sm_port_guid), sms)
    else:
        ib = fab.driver_options(sub.sm_node, sms)
    restart = [str(Path(sys.executable).parent / "gpufabric"), "--home", str(lab.home), "lab", "restart-sm"]
    if sub.instance != ONE_SUBNET:
        restart += ["--subnet", sub.instance]
    options = {
        **ib,
        "opensm_conf": str(fab.opensm_conf),  # read by observe: the hardening audit
        "restart_command": restart,
    }
    return {"driver": "opensm", "options": options}, sms


def fabrics_config(lab: Lab, st: LabStatus, quarantine_vlan: int) -> dict[str, Any]:
    one = SubnetStatus(ONE_SUBNET, "", None, None, "", "", "", st.sm_node, st.sm_port_guid, sm_pair=st.sm_pair)
    sections = [(sub.instance, *ib_section(lab, sub)) for sub in st.subnets or (one,)]
    sms = [g for _name, _section, guids in sections for g in guids]
    extra: dict[str, Any] = {}
    if st.nvlink_section:
        extra["nvlink"] = st.nvlink_section
    if st.dpu_section:
        extra["dpu"] = st.dpu_section
    if [name for name, _s, _g in sections] == [ONE_SUBNET]:
        extra["infiniband"] = sections[0][1]
    else:
        extra["fabrics"] = [{"name": name, "kind": "infiniband", **section} for name, section, _g in sections]
    remote = f"unix:{st.ovsdb_socket}"
    return {
        **extra,
        "ethernet": [
            {"driver": "ovsdb", "options": {"switch": br, "remote": remote, "quarantine_vlan": quarantine_vlan},
             "uplinks": [st.spine_bridge]}  # each leaf's patch pair to the spine (netns.ensure_ethernet)
            for br in st.leaf_bridges
        ] + [  # each VM host's hypervisor bridge, on its own OVS instance (lab/vmhost.py)
            {"driver": "ovsdb", "options": {"switch": hv_bridge(n), "remote": f"unix:{hv_ovs(lab.dir, n, '').db_socket}",
                                            "quarantine_vlan": quarantine_vlan},
             "uplinks": [node.ethernet[0].bridge]}  # eth0, to the node's leaf
            for n in st.vm_hosts if (node := st.node(n)) is not None
        ],
        "sm_port_guids": sms,
        "trusted_sm_guids": sms,
    }


def write_fabrics_config(path: Path, lab: Lab, st: LabStatus, quarantine_vlan: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(fabrics_config(lab, st, quarantine_vlan), sort_keys=True))
    tmp.replace(path)
    return path
