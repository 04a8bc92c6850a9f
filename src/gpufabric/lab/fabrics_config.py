"""The ``fabrics.yaml`` of a running lab: one OVSDB driver per leaf bridge and the OpenSM
driver of the trusted SM (partitions.conf, pid file, log, and the umad2sim environment to
read PKey tables by SMP as the SM node). ``gpufabric lab up`` writes it next to the store.

A lab with the SM pair (``lab up --sm-pair``) gets the pair's options instead
(:meth:`~gpufabric.lab.smpair.SmPair.driver_options`): ``sm_hosts`` for sm-01 and sm-02, each
over its sshd, so every write goes to both SMs and the master is found by SMInfo; both SMs'
port GUIDs are trusted and full members of the default partition."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from gpufabric.domain.values import Guid
from gpufabric.lab.lab import Lab, LabStatus
from gpufabric.lab.labib import pair


def fabrics_config(lab: Lab, st: LabStatus, quarantine_vlan: int) -> dict[str, Any]:
    fab = lab.ib_fabric()
    sms = [h.port_guid for h in st.sm_pair.hosts] if st.sm_pair else [st.sm_port_guid]
    if st.sm_pair:
        ib = pair(lab.dir, fab).driver_options(st.sm_node, Guid.parse(st.sm_port_guid), sms)
    else:
        ib = fab.driver_options(st.sm_node, sms)
    remote = f"unix:{st.ovsdb_socket}"
    extra: dict[str, Any] = {}
    if st.nvlink_section:
        extra["nvlink"] = st.nvlink_section
    if st.dpu_section:
        extra["dpu"] = st.dpu_section
    return {
        **extra,
        "ethernet": [
            {"driver": "ovsdb", "options": {"switch": br, "remote": remote, "quarantine_vlan": quarantine_vlan}}
            for br in st.leaf_bridges
        ],
        "infiniband": {
            "driver": "opensm",
            "options": {
                **ib,
                "opensm_conf": str(fab.opensm_conf),  # read by observe: the hardening audit
                "restart_command": [
                    str(Path(sys.executable).parent / "gpufabric"),
                    "--home",
                    str(lab.home),
                    "lab",
                    "restart-sm",
                ],
            },
        },
        "sm_port_guids": sms,
        "trusted_sm_guids": sms,
    }


def write_fabrics_config(path: Path, lab: Lab, st: LabStatus, quarantine_vlan: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(fabrics_config(lab, st, quarantine_vlan), sort_keys=True))
    tmp.replace(path)
    return path
