"""The ``fabrics.yaml`` of a running lab: one OVSDB driver per leaf bridge and the OpenSM
driver of the trusted SM (partitions.conf, pid file, log, and the umad2sim environment to
read PKey tables by SMP as the SM node). ``gpufabric lab up`` writes it next to the store."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from gpufabric.lab.lab import Lab, LabStatus


def fabrics_config(lab: Lab, st: LabStatus, quarantine_vlan: int) -> dict[str, Any]:
    fab = lab.ib_fabric()
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
                **fab.driver_options(st.sm_node, [st.sm_port_guid]),
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
        "sm_port_guids": [st.sm_port_guid],
        "trusted_sm_guids": [st.sm_port_guid],
    }


def write_fabrics_config(path: Path, lab: Lab, st: LabStatus, quarantine_vlan: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(fabrics_config(lab, st, quarantine_vlan), sort_keys=True))
    tmp.replace(path)
    return path
