"""A stand-in ``fmpm`` for the lab and tests: Fabric Manager cannot run on this machine (it
needs NVSwitch hardware and the NVIDIA driver), so this speaks fmpm's command line (``-l``,
``-a ID``, ``-d ID``, ``--set-activated-list``, ``--get-nvlink-failed-devices``,
``--list-unsupported-partitions``, ``--hostname``, ``--unix-domain-socket``), prints fmpm's
output shapes (jsoncpp StyledWriter JSON; ``Failed to ... fmReturn: -7``) and exits with FM's
return code, enforcing FM's rules on a state file: a GPU is in at most one active partition
(-7), activating an active partition -7, deactivating an inactive one -4, an unknown id -1.

One state file per FM (= per node): the ``--unix-domain-socket`` path itself, or for
``--hostname H`` the file ``$GPUFABRIC_FMPM_STANDIN_DIR/H.json``; no state file = FM not
running ("Failed to connect to Fabric Manager instance.", -9). Unlike fmpm 1.0.1, whose
``--unix-domain-socket`` is overridden by the default hostname, the socket path is honoured.

Stand-in-only flags: ``--standin-init BOARD`` (create the state: every partition inactive,
GPUs healthy, the PCI bus map of a real HGX H100 box), ``--standin-restart`` (FM restarted:
it no longer knows the active set; replay it with ``--set-activated-list``),
``--standin-set-fabric MODULE STATE STATUS`` (the GPU's ``nvidia-smi -q`` Fabric section),
``--standin-set-domain CLUSTER_UUID CLIQUE_ID`` (the NVLink domain every GPU's Fabric section
reports, as the GPUs of a multi-node NVLink rack print it; ``N/A N/A`` as PCIe GPUs print it;
a fresh state prints what an HGX H100 board prints on driver 565: CliqueId 0 and the all-zero
ClusterUUID, no multi-node domain),
``--standin-fail-links MODULE PORTS`` (``--get-nvlink-failed-devices``; "" clears) and
``--standin-nvidia-smi-q`` (print ``nvidia-smi -q`` for the GPUs). Run as
``python -m gpufabric.lab.fmpm_standin`` or ``gpufabric-fmpm-standin``.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import tempfile
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from gpufabric.fabrics.nvlink.readers.fmreturn import FmReturn
from gpufabric.fabrics.nvlink.segments import DEFAULT_BOARD, HGX_8GPU_PCI, MAX_PARTITIONS, TABLES
from gpufabric.lab.jsoncpp import styled

ENV_DIR: Final = "GPUFABRIC_FMPM_STANDIN_DIR"
# MAKE_FM_PARAM_VERSION-shaped struct versions (sizeof | version << 24), as fmpm prints them
LIST_VERSION: Final = 0x2000000 | 131852
UNSUPPORTED_VERSION: Final = 0x1000000 | 4356
FAILED_VERSION: Final = 0x1000000 | 26888
NVLINKS: Final = 18
LINE_RATE: Final = 26562

State = dict[str, Any]


def init_state(path: Path, board: str = DEFAULT_BOARD, pci: Mapping[int, str] | None = None, node: str = "") -> State:
    """Write a fresh FM state for ``board`` at ``path`` (no partition active) and return it."""
    parts = TABLES[board]
    mids = sorted({m for gpus in parts.values() for m in gpus})
    buses = dict(pci or (HGX_8GPU_PCI if board.startswith("hgx-") and len(mids) == 8 else {}))
    seed = zlib.crc32((node or str(path)).encode()) % 0xFFFF
    state: State = {
        "board": board,
        "node": node,
        "partitions": {str(pid): list(g) for pid, g in sorted(parts.items())},
        "active": [],
        "unsupported": [],
        "gpus": {
            str(m): {
                "uuid": f"GPU-{seed:04x}{m:04x}-5b1c-6e1d-7f2e-{m:012x}",
                "pciBusId": buses.get(m, f"00000000:{0x10 + m:02X}:00.0"),
                "state": "Completed",
                "status": "Success",
                "cliqueId": "0",
                "clusterUuid": "00000000-0000-0000-0000-000000000000",
                "failedPorts": [],
            }
            for m in mids
        },
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    _save(path, state)
    return state


def lab_section(nodes: Sequence[str], state_dir: Path, board: str = DEFAULT_BOARD) -> dict[str, Any]:
    """One stand-in FM per node under ``state_dir`` (fresh state, nothing active) and the
    ``nvlink`` section of ``fabrics.yaml`` that drives them through the fmpm backend
    (``nvidia-smi -q`` health included)."""
    cmd = [sys.executable, "-m", "gpufabric.lab.fmpm_standin"]
    fm: dict[str, str] = {}
    smi: dict[str, list[str]] = {}
    for node in nodes:
        path = state_dir / f"{node}.fm"
        init_state(path, board, node=node)
        fm[node] = f"unix:{path}"
        smi[node] = [*cmd, "--unix-domain-socket", str(path), "--standin-nvidia-smi-q"]
    return {"driver": "fmpm", "options": {"fmpm": cmd, "fm": fm, "smi": smi}}


def _save(path: Path, state: State) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(state, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(f"{path}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def load_state(path: Path) -> State:
    with open(path) as f:
        data: State = json.load(f)
    return data


def _gpu_json(state: State, m: int) -> dict[str, Any]:
    g = state["gpus"][str(m)]
    failed = len(g.get("failedPorts") or [])
    return {
        "physicalId": m,
        "uuid": g["uuid"],
        "pciBusId": g["pciBusId"],
        "numNvLinksAvailable": NVLINKS - failed,
        "maxNumNvLinks": NVLINKS,
        "nvlinkLineRateMBps": LINE_RATE,
    }


def render_list(state: State) -> str:
    """``fmpm -l`` of ``state``."""
    infos = [
        {
            "partitionId": int(pid),
            "isActive": 1 if int(pid) in state["active"] else 0,
            "numGpus": len(gpus),
            "gpuInfo": [_gpu_json(state, m) for m in gpus],
        }
        for pid, gpus in sorted(state["partitions"].items(), key=lambda kv: int(kv[0]))
    ]
    return styled({"version": LIST_VERSION, "numPartitions": len(infos), "maxNumPartitions": MAX_PARTITIONS, "partitionInfo": infos})


def render_unsupported(state: State) -> str:
    infos = [
        {"partitionId": pid, "numGpus": len(state["partitions"][str(pid)]), "gpuPhysicalIds": state["partitions"][str(pid)]}
        for pid in sorted(state.get("unsupported", []))
    ]
    return styled({"version": UNSUPPORTED_VERSION, "numPartitions": len(infos), "partitionInfo": infos})


def render_failed(state: State) -> str:
    gpus = [
        {"uuid": g["uuid"], "pciBusId": g["pciBusId"], "numPorts": len(g["failedPorts"]), "portNum": g["failedPorts"]}
        for _, g in sorted(state["gpus"].items(), key=lambda kv: int(kv[0]))
        if g.get("failedPorts")
    ]
    return styled(
        {"version": FAILED_VERSION, "numGpus": len(gpus), "numSwitches": 0, "gpuInfo": gpus, "switchInfo": []}
    )


def render_smi_q(state: State) -> str:
    """``nvidia-smi -q`` (the fields gpufabric reads) for the GPUs of ``state``, in PCI order."""
    out = ["", "==============NVSMI LOG==============", "", "Driver Version                            : 565.57.01"]
    out += ["CUDA Version                              : 12.7", "", f"Attached GPUs                             : {len(state['gpus'])}"]
    by_bus = sorted(state["gpus"].items(), key=lambda kv: kv[1]["pciBusId"])
    for minor, (m, g) in enumerate(by_bus):
        bus = g["pciBusId"]
        out += [f"GPU {bus}", "    Product Name                          : NVIDIA H100 80GB HBM3"]
        out += [f"    GPU UUID                              : {g['uuid']}", f"    Minor Number                          : {minor}"]
        out += [f"    Module ID                             : {m}", "    PCI", f"        Bus                               : 0x{bus.split(':')[1]}"]
        out += [f"        Bus Id                            : {bus}", "    Fabric"]
        out += [f"        State                             : {g['state']}", f"        Status                            : {g['status']}"]
        out += [f"        CliqueId                          : {g['cliqueId']}", f"        ClusterUUID                       : {g['clusterUuid']}"]
        out += ["        Health", "            Bandwidth                     : N/A"]
        out += ["    Processes                             : None", ""]
    return "\n".join(out) + "\n"


def _fail(what: str, code: FmReturn) -> int:
    print(f"Failed to {what}. fmReturn: {int(code)}")
    return int(code)


def activate(state: State, pid: int) -> FmReturn:
    gpus = state["partitions"].get(str(pid))
    if gpus is None:
        return FmReturn.BADPARAM
    if pid in state["unsupported"]:
        return FmReturn.NOT_SUPPORTED
    if pid in state["active"]:
        return FmReturn.IN_USE
    busy = {m for a in state["active"] for m in state["partitions"][str(a)]}
    if busy & set(gpus):
        return FmReturn.IN_USE
    state["active"] = sorted([*state["active"], pid])
    return FmReturn.SUCCESS


def deactivate(state: State, pid: int) -> FmReturn:
    if str(pid) not in state["partitions"]:
        return FmReturn.BADPARAM
    if pid not in state["active"]:
        return FmReturn.UNINITIALIZED
    state["active"] = [a for a in state["active"] if a != pid]
    return FmReturn.SUCCESS


def set_activated(state: State, pids: Sequence[int]) -> FmReturn:
    """Replay after an FM restart: the active set becomes ``pids`` (checked like -a)."""
    trial = {**state, "active": []}
    for pid in pids:
        rc = activate(trial, pid)
        if rc is not FmReturn.SUCCESS:
            return rc
    state["active"] = trial["active"]
    return FmReturn.SUCCESS


def _state_path(hostname: str, socket: str, explicit: str) -> Path | None:
    if explicit:
        return Path(explicit)
    if socket:
        return Path(socket)
    base = os.environ.get(ENV_DIR)
    return Path(base) / f"{hostname}.json" if base else None


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args == ["-h"]:
        print(__doc__)
        return 0
    op, value, hostname, socket, explicit = "", "", "127.0.0.1", "", ""
    extra: list[str] = []
    i = 0
    takes = {"-a", "-d", "--set-activated-list", "--hostname", "--unix-domain-socket", "--standin-state"}
    takes |= {"--standin-init", "--standin-fail-links", "--standin-set-fabric", "--standin-set-domain"}
    while i < len(args):
        a = args[i]
        if a in takes and i + 1 >= len(args):
            print(f"Error: {a} option requires a value.", file=sys.stderr)
            return 1
        if a == "--hostname":
            hostname, i = args[i + 1], i + 2
        elif a == "--unix-domain-socket":
            socket, i = args[i + 1], i + 2
        elif a == "--standin-state":
            explicit, i = args[i + 1], i + 2
        elif a == "--standin-set-fabric":
            if i + 3 >= len(args):
                print("Error: --standin-set-fabric MODULE STATE STATUS", file=sys.stderr)
                return 1
            op, value, extra, i = a, args[i + 1], args[i + 2 : i + 4], i + 4
        elif a == "--standin-set-domain":
            if i + 2 >= len(args):
                print("Error: --standin-set-domain CLUSTER_UUID CLIQUE_ID", file=sys.stderr)
                return 1
            op, value, i = a, args[i + 1], i + 3
            extra = [args[i - 1]]
        elif a == "--standin-fail-links":
            if i + 2 >= len(args):
                print("Error: --standin-fail-links MODULE PORTS", file=sys.stderr)
                return 1
            op, value, extra, i = a, args[i + 1], [args[i + 2]], i + 3
        elif a in takes:
            op, value, i = a, args[i + 1], i + 2
            if a == "-a" and (not value.isdigit() or int(value) >= MAX_PARTITIONS):
                print("Invalid Partition ID.")
                return int(FmReturn.BADPARAM)
        elif a in {"-l", "--get-nvlink-failed-devices", "--list-unsupported-partitions", "--standin-restart"} or a == "--standin-nvidia-smi-q":
            op, i = a, i + 1
        elif a == "-v":
            print("1.0.1 (gpufabric stand-in)")
            return 0
        else:
            print("Invalid argument.\n", file=sys.stderr)
            return int(FmReturn.BADPARAM)
    path = _state_path(hostname, socket, explicit)
    if op == "--standin-init":
        if value not in TABLES:
            print(f"unknown baseboard {value!r}; known: {', '.join(sorted(TABLES))}", file=sys.stderr)
            return 1
        if path is None:
            print(f"no state file: pass --unix-domain-socket or set {ENV_DIR}", file=sys.stderr)
            return 1
        init_state(path, value)
        return 0
    if path is None or not path.exists():
        print("Failed to connect to Fabric Manager instance.")
        return int(FmReturn.CONNECTION_NOT_VALID)
    with _locked(path):
        state = load_state(path)
        rc = _run(op, value, extra, state)
        _save(path, state)
    return rc


def _ids(value: str) -> list[int] | None:
    try:
        return [int(x) for x in value.split(",") if x != ""]
    except ValueError:
        return None


def _run(op: str, value: str, extra: list[str], state: State) -> int:
    pure: dict[str, Callable[[State], str]] = {
        "-l": render_list,
        "--list-unsupported-partitions": render_unsupported,
        "--get-nvlink-failed-devices": render_failed,
        "--standin-nvidia-smi-q": render_smi_q,
    }
    if op in pure:
        sys.stdout.write(pure[op](state))
        return 0
    if op in {"-a", "-d"}:
        if not value.isdigit():
            return _fail("activate partition" if op == "-a" else "deactivate partition", FmReturn.BADPARAM)
        fn, what = (activate, "activate partition") if op == "-a" else (deactivate, "deactivate partition")
        rc = fn(state, int(value))
        return 0 if rc is FmReturn.SUCCESS else _fail(what, rc)
    if op == "--set-activated-list":
        ids = _ids(value)
        if ids is None or any(not 0 <= p < MAX_PARTITIONS for p in ids):
            print(f"Invalid partition Id {value} was given.")
            return int(FmReturn.BADPARAM)
        rc = set_activated(state, list(dict.fromkeys(ids)))
        return 0 if rc is FmReturn.SUCCESS else _fail("set activated partitions", rc)
    if op == "--standin-restart":
        state["active"] = []
        return 0
    if op == "--standin-set-domain":
        for g in state["gpus"].values():
            g["clusterUuid"], g["cliqueId"] = value, extra[0]
        return 0
    gpu = state["gpus"].get(value)
    if gpu is None:
        print(f"no GPU with module id {value!r}", file=sys.stderr)
        return 1
    if op == "--standin-set-fabric":
        gpu["state"], gpu["status"] = extra
    elif op == "--standin-fail-links":
        ports = _ids(extra[0])
        if ports is None:
            print(f"bad port list {extra[0]!r}", file=sys.stderr)
            return 1
        gpu["failedPorts"] = ports
    return 0


def main_exit() -> None:
    """Console-script entry (``gpufabric-fmpm-standin``): exit with FM's code like fmpm."""
    sys.exit(main())


if __name__ == "__main__":
    main_exit()
