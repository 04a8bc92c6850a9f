"""Drive networking-generic-switch 10.2.0 standalone (runs in NGS's own venv, not gpufabric's).

Usage: ngs-venv/bin/python bench/ngs_worker.py '<json spec>'
spec: {"host", "port", "username", "key_file", "ports": [...], "vlan": int, "threads": int}
threads == 0: serial (one plug after the other, the way one Neutron worker binds);
threads > 0: a pool of that many threads sharing one NGS device, no coordination.
Prints one line "NGS-RESULT <json>": {"seconds", "ok": [...], "failed": {port: error}}.
Each plug is NGS's ``plug_port_to_network`` through its ``netmiko_ovs_linux`` device:
a new SSH connection (netmiko, PTY shell) per call, ``ovs-vsctl set port ...`` twice.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from concurrent.futures import ThreadPoolExecutor


def main() -> None:
    spec = json.loads(sys.argv[1])
    from oslo_config import cfg
    from oslo_log import log as oslo_logging

    conf = cfg.CONF
    oslo_logging.register_options(conf)
    conf([], project="ngs-bench")
    oslo_logging.setup(conf, "ngs-bench")
    logging.getLogger().setLevel(logging.WARNING)
    from networking_generic_switch import devices

    sw = devices.device_manager(
        {
            "device_type": "netmiko_ovs_linux",
            "ip": spec["host"],
            "port": str(spec["port"]),
            "username": spec["username"],
            "key_file": spec["key_file"],
            "use_keys": "True",
            "allow_agent": "False",
        },
        "ovs-bench",
    )
    ok: list[str] = []
    failed: dict[str, str] = {}

    def plug(port: str) -> None:
        try:
            sw.plug_port_to_network(port, spec["vlan"])
            ok.append(port)
        except Exception as e:  # recorded, reported by the caller
            failed[port] = f"{type(e).__name__}: {e}"[:300]

    t0 = time.monotonic()
    if spec["threads"] == 0:
        for p in spec["ports"]:
            plug(p)
    else:
        with ThreadPoolExecutor(max_workers=spec["threads"]) as pool:
            list(pool.map(plug, spec["ports"]))
    seconds = time.monotonic() - t0
    print("NGS-RESULT " + json.dumps({"seconds": seconds, "ok": sorted(ok), "failed": failed}), flush=True)


if __name__ == "__main__":
    main()
