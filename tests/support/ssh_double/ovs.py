"""A double of ``ovs-vsctl`` on a Linux host (NOT Open vSwitch): the Bridge and Port rows of
one OVSDB, ``set port`` commands of one invocation applied as ONE transaction (a command
that fails — e.g. ``no row "x" in table Port`` — leaves every row as it was), and
``--format=json list bridge / list port`` printed as ovs-vsctl prints them (a one-element
set as its element, an empty optional as ``["set",[]]``). The real thing runs in
tests/functional (test_ssh_ovs.py); this double lets the contract run without root.
Initial state: the recorded sample tests/fixtures/ssh/ovs/running-config.json plus ports.
"""

from __future__ import annotations

import json
import shlex
import uuid
from typing import Any

from support.ssh_double.base import CliDouble, Reply

COLUMNS = ("_uuid", "name", "tag", "trunks", "vlan_mode", "protected")


def _set(v: Any) -> list[Any]:
    if isinstance(v, list) and len(v) == 2 and v[0] == "set":
        return list(v[1])
    return [v]


def _json_set(vs: list[Any]) -> Any:
    return vs[0] if len(vs) == 1 else ["set", vs]


class OvsDouble(CliDouble):
    name = "ovs"

    def __init__(self, sample: str, bridge: str, ports: tuple[str, ...], quarantine: int) -> None:
        super().__init__()
        bridges, port_table = (json.loads(line) for line in sample.splitlines() if line.startswith("{"))
        self.rows: dict[str, dict[str, Any]] = {}
        for row in port_table["data"]:
            r = dict(zip(port_table["headings"], row, strict=True))
            self.rows[r["name"]] = {"_uuid": r["_uuid"][1], "tag": _set(r["tag"]), "trunks": _set(r["trunks"]),
                                    "vlan_mode": _set(r["vlan_mode"]), "protected": bool(r["protected"])}  # fmt: skip
        self.bridges: dict[str, list[str]] = {}
        by_uuid = {r["_uuid"]: n for n, r in self.rows.items()}
        for row in bridges["data"]:
            name, members = row
            self.bridges[name] = [by_uuid[u[1]] for u in _set(members)]
        for p in ports:
            self.rows[p] = {"_uuid": str(uuid.uuid4()), "tag": [quarantine], "trunks": [], "vlan_mode": ["access"],
                            "protected": True}  # fmt: skip
            self.bridges[bridge].append(p)

    def command(self, line: str) -> Reply:
        w = shlex.split(line)
        if not w or w[0] != "ovs-vsctl":
            return Reply(err=f"bash: {w[0] if w else ''}: command not found\n", status=127)
        i = 1
        while i < len(w) and w[i].startswith("--") and w[i] != "--":
            i += 1
        opts, body = w[1:i], w[i:]
        cmds: list[list[str]] = [[]]
        for x in body:
            if x == "--":
                cmds.append([])
            else:
                cmds[-1].append(x)
        cmds = [c for c in cmds if c]
        if "--format=json" in opts:
            return Reply("".join(self._list(c) for c in cmds))
        staged = {n: dict(r) for n, r in self.rows.items()}
        for c in cmds:
            if c[:2] != ["set", "port"] or len(c) < 4:
                return Reply(err=f"ovs-vsctl: unknown command '{c[0]}'; use --help for help\n", status=1)
            row = staged.get(c[2])
            if row is None:
                return Reply(err=f'ovs-vsctl: no row "{c[2]}" in table Port\n', status=1)
            for kv in c[3:]:
                k, _, v = kv.partition("=")
                if k in ("tag", "vlan_mode"):
                    row[k] = [] if v == "[]" else [int(v) if k == "tag" else v]
                elif k == "trunks":
                    row[k] = [] if v == "[]" else sorted(int(t) for t in v.strip("[]").split(","))
                elif k == "protected":
                    row[k] = v == "true"
                else:
                    return Reply(err=f'ovs-vsctl: Port does not contain a column whose name matches "{k}"\n', status=1)
        self.rows = staged  # one transaction: all or nothing
        return Reply()

    def _list(self, c: list[str]) -> str:
        cols = [x.split("=", 1)[1].split(",") for x in c if x.startswith("--columns=")]
        table = c[-1]
        if table == "bridge":
            data = [[n, ["set", [["uuid", self.rows[p]["_uuid"]] for p in ps]]] for n, ps in self.bridges.items()]
            return json.dumps({"data": data, "headings": ["name", "ports"]}, separators=(",", ":")) + "\n"
        heads = cols[0] if cols else list(COLUMNS)
        data = []
        for name, r in self.rows.items():
            vals = {"_uuid": ["uuid", r["_uuid"]], "name": name, "tag": _json_set(r["tag"]),
                    "trunks": ["set", r["trunks"]] if len(r["trunks"]) != 1 else r["trunks"][0],
                    "vlan_mode": _json_set(r["vlan_mode"]), "protected": r["protected"]}  # fmt: skip
            data.append([vals[h] for h in heads])
        return json.dumps({"data": data, "headings": heads}, separators=(",", ":")) + "\n"
