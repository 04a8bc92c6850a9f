"""A stand-in for NVIDIA's ``mlxconfig``/``flint``/``mlxfwmanager`` on one lab DPU (no BlueField
here): answers ``mlxconfig -d DEV -e q``, ``mlxconfig -d DEV -y set K=V`` (changes the Next Boot
column only), ``flint -d DEV q``, ``mlxfwmanager --query -d DEV``, ``burn VERSION`` (the lab's
``flint -i fw.bin burn``: the image on flash changes, the running firmware does not) and
``power-cycle`` (the lab's BMC: Next Boot becomes Current, the flashed image runs) in the formats
of the recorded real outputs (tests/fixtures/real/: flint's ``FW Version(Running)`` and
mlxfwmanager's ``FW (Running)`` row only while the two differ). State: one JSON file per DPU.

    python -m gpufabric.lab.mlxstub STATE.json mlxconfig -d /dev/mst/mt41686_pciconf0 -e q

It is the argv prefix of ``dpu.mst.command`` in a lab's fabrics.yaml."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

MODES: dict[str, dict[str, str]] = {
    "embedded": {"INTERNAL_CPU_MODEL": "EMBEDDED_CPU(1)", "INTERNAL_CPU_OFFLOAD_ENGINE": "ENABLED(0)"},
    "separated": {"INTERNAL_CPU_MODEL": "SEPARATED_HOST(0)", "INTERNAL_CPU_OFFLOAD_ENGINE": "ENABLED(0)"},
    "nic": {"INTERNAL_CPU_MODEL": "EMBEDDED_CPU(1)", "INTERNAL_CPU_OFFLOAD_ENGINE": "DISABLED(1)"},
}
ENUMS = {"INTERNAL_CPU_MODEL": {"0": "SEPARATED_HOST(0)", "1": "EMBEDDED_CPU(1)"},
         "INTERNAL_CPU_OFFLOAD_ENGINE": {"0": "ENABLED(0)", "1": "DISABLED(1)"}}  # fmt: skip


def write_state(
    path: Path, mode: str = "embedded", firmware: str = "24.35.1012", device_type: str = "BlueField2"
) -> None:
    values = {**MODES[mode], "LINK_TYPE_P1": "ETH(2)"}
    path.write_text(json.dumps({"device_type": device_type, "firmware": firmware, "psid": "MT_0000000559",
                                "default": dict(values), "current": dict(values), "next": dict(values)}))  # fmt: skip


def _mlxconfig(st: dict[str, Any], dev: str) -> str:
    lines = ["", "Device #1:", "----------", "", f"Device type:    {st['device_type']}", f"Device:         {dev}", "",
             f"{'Configurations:':<45}{'Default':<16}{'Current':<16}Next Boot"]  # fmt: skip
    for k in st["next"]:
        d, c, n = st["default"].get(k, ""), st["current"].get(k, ""), st["next"][k]
        star = "*" if n != c or n != d else " "
        lines.append(f"{star}        {k:<36}{d:<16} {c:<16} {n}")
    lines.append("The '*' shows parameters with next value different from default/current value.")
    return "\n".join(lines) + "\n"


def _flashed(st: dict[str, Any]) -> str:
    return str(st.get("flashed") or st["firmware"])


def _flint(st: dict[str, Any]) -> str:
    flashed = _flashed(st)
    running = f"FW Version(Running):   {st['firmware']}\n" if flashed != st["firmware"] else ""
    return (f"Image type:            FS4\nFW Version:            {flashed}\n{running}"
            f"Product Version:       {flashed}\nPSID:                  {st['psid']}\n"
            "Security Attributes:   N/A\n")  # fmt: skip


def _mlxfwmanager(st: dict[str, Any], dev: str) -> str:
    flashed = _flashed(st)
    running = f"     FW (Running)   {st['firmware']:<15}N/A\n" if flashed != st["firmware"] else ""
    return ("Querying Mellanox devices firmware ...\n\nDevice #1:\n----------\n\n"
            f"  Device Type:      {st['device_type']}\n  PSID:             {st['psid']}\n"
            f"  PCI Device Name:  {dev}\n  Versions:         Current        Available\n"
            f"     FW             {flashed:<15}N/A\n{running}\n  Status:           No matching image found\n")  # fmt: skip


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: mlxstub STATE (mlxconfig -d DEV [-e] q | mlxconfig -d DEV -y set K=V | flint -d DEV q | "
              "mlxfwmanager --query -d DEV | burn VERSION | power-cycle)",
              file=sys.stderr)  # fmt: skip
        return 2
    path, tool, args = Path(argv[0]), argv[1], argv[2:]
    st = json.loads(path.read_text())
    dev = args[args.index("-d") + 1] if "-d" in args else ""
    if tool == "power-cycle":
        st["current"] = dict(st["next"])
        st["firmware"] = _flashed(st)
        path.write_text(json.dumps(st))
        return 0
    if tool == "burn" and len(args) == 1:
        st["flashed"] = args[0]
        path.write_text(json.dumps(st))
        return 0
    if tool == "flint" and "q" in args:
        sys.stdout.write(_flint(st))
        return 0
    if tool == "mlxfwmanager" and "--query" in args:
        sys.stdout.write(_mlxfwmanager(st, dev))
        return 0
    if tool == "mlxconfig" and ("q" in args or "query" in args):
        sys.stdout.write(_mlxconfig(st, dev))
        return 0
    if tool == "mlxconfig" and ("set" in args or "s" in args):
        for kv in args[args.index("set" if "set" in args else "s") + 1 :]:
            k, _, v = kv.partition("=")
            names = {e.split("(")[0]: e for e in ENUMS.get(k, {}).values()}  # set K=1 or K=EMBEDDED_CPU
            st["next"][k] = ENUMS.get(k, {}).get(v) or names.get(v, v)
        path.write_text(json.dumps(st))
        print("Applying... Done!\n-I- Please reboot machine to load new configurations.")
        return 0
    print(f"-E- unsupported: {tool} {' '.join(args)}", file=sys.stderr)
    return 3


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
