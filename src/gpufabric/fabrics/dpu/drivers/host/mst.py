"""``MstReader``: reads each DPU's mode and firmware with NVIDIA's firmware tools (I/O), and the
power-control seam.

Section (``dpu.mst`` in fabrics.yaml)::

    mst:
      command: [ssh, -o, StrictHostKeyChecking=yes, "root@{host}-mgmt"]  # argv prefix; {host} = host node
      device: /dev/mst/mt41686_pciconf0     # default device (inventory ``mst_device`` overrides)
      firmware: flint                       # flint (flint -d DEV q) or mlxfwmanager (--query -d DEV)
      privhost: false                       # also run mlxprivhost -d DEV q (restricted mode)
      timeout: 20                           # seconds per command

Each read runs ``<command> mlxconfig -d DEV -e q``, then the firmware query (and
``mlxprivhost``): on the host (``command: []``), over SSH with host keys checked, or through a
local agent. The lab's stand-in is ``python -m gpufabric.lab.mlxstub STATE`` as the prefix.

Power cycles: gpufabric never power-cycles a node by itself. An operator power-cycles host and
DPU and then runs ``gpufabric node power-cycled NODE``, which re-reads the facts (and refuses
while the change is still pending). A BMC driver (Redfish ``ComputerSystem.Reset`` /
``ipmitool chassis power cycle``) would be a driver of its own, its contract in
:mod:`gpufabric.fabrics.dpu.drivers.base`, called by that command first; none is shipped (no BMC
here to test one against)."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from typing import Any, Final

from gpufabric.domain.errors import ConfigError
from gpufabric.fabrics.dpu.entries.info import DpuInfo
from gpufabric.fabrics.dpu.readers.dpumode import DpuFacts, facts_of
from gpufabric.fabrics.dpu.readers.mlx import (
    Firmware,
    parse_flint_query,
    parse_mlxconfig,
    parse_mlxfwmanager,
    parse_mlxprivhost,
)

SECTION_KEYS: Final = frozenset({"command", "device", "firmware", "privhost", "timeout"})
DEFAULT_DEVICE: Final = "/dev/mst/mt41686_pciconf0"


class MstReader:
    def __init__(
        self, command: Sequence[str], device: str = DEFAULT_DEVICE, firmware: str = "flint",
        privhost: bool = False, timeout: float = 20.0,
    ) -> None:  # fmt: skip
        self.command, self.device, self.firmware = list(command), device, firmware
        self.privhost, self.timeout = privhost, timeout

    @classmethod
    def from_section(cls, section: Any) -> MstReader:
        if not isinstance(section, Mapping):
            raise ConfigError("dpu.mst", section, f"a mapping with keys {', '.join(sorted(SECTION_KEYS))}")
        for k in section:
            if k not in SECTION_KEYS:
                raise ConfigError(f"dpu.mst.{k}", section[k], f"known keys only: {', '.join(sorted(SECTION_KEYS))}")
        cmd = section.get("command", [])
        if not isinstance(cmd, list) or not all(isinstance(c, str) and c for c in cmd):
            raise ConfigError("dpu.mst.command", cmd, "a list of non-empty strings (an argv prefix; [] runs locally)")
        fw = section.get("firmware", "flint")
        if fw not in ("flint", "mlxfwmanager"):
            raise ConfigError("dpu.mst.firmware", fw, "flint or mlxfwmanager")
        timeout = section.get("timeout", 20)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 300:
            raise ConfigError("dpu.mst.timeout", timeout, "a number of seconds in (0, 300]")
        device = section.get("device", DEFAULT_DEVICE)
        if not isinstance(device, str) or not device:
            raise ConfigError("dpu.mst.device", device, "a device path like /dev/mst/mt41686_pciconf0")
        return cls(cmd, device, fw, bool(section.get("privhost", False)), float(timeout))

    def _run(self, host: str, args: list[str]) -> str:
        argv = [c.replace("{host}", host) for c in self.command] + args
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise RuntimeError(f"{args[0]}: {type(e).__name__}: {e}") from None
        if p.returncode != 0:
            raise RuntimeError(f"{args[0]}: exit {p.returncode}: {(p.stderr or p.stdout).strip()[:200]}")
        return p.stdout

    def read(self, info: DpuInfo) -> DpuFacts:
        """The facts of ``info``'s DPU; a failed read is facts with ``error`` set (never raises)."""
        dev = info.mst_device or self.device
        try:
            cfg = parse_mlxconfig(self._run(info.host, ["mlxconfig", "-d", dev, "-e", "q"]))
            fw: Firmware
            if self.firmware == "flint":
                fw = parse_flint_query(self._run(info.host, ["flint", "-d", dev, "q"]))
            else:
                fw = parse_mlxfwmanager(self._run(info.host, ["mlxfwmanager", "--query", "-d", dev]))
            priv = parse_mlxprivhost(self._run(info.host, ["mlxprivhost", "-d", dev, "q"])) if self.privhost else ""
        except (RuntimeError, ValueError) as e:
            return DpuFacts(info.host, "unknown", "unknown", error=str(e)[:300])
        return facts_of(info.host, cfg, fw, priv)
