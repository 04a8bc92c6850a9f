"""Doubles of the JSON-configured switch OSes (NOT the vendors' software):

* SONiC's config CLI over CONFIG_DB: ``config vlan add``, ``config vlan member add [-u] / del``,
  ``config portchannel member add / del`` (PORTCHANNEL_MEMBER; refused for a VLAN member or a
  member of another PortChannel), ``config interface startup / shutdown``, ``sonic-db-cli
  CONFIG_DB EXISTS``, ``config save``;
  ``show runningconfiguration all`` prints CONFIG_DB as JSON. Each command acts at once (no
  transaction): under ``set -e`` the script stops at the first failing command, after the
  earlier ones took effect.
* Cumulus NVUE: ``nv set / unset`` stage into a *pending revision* that outlives the session;
  ``nv config apply`` applies it (refused when an interface is in two bonds' ``bond member``
  lists), ``nv config detach`` drops it (the next ``nv set`` starts from the applied revision),
  ``nv config show -o json`` prints the applied revision.

Initial states: the recorded samples (tests/fixtures/ssh/{sonic,nvue}/running-config.json)
plus provisioned ports (admin/link down, untagged in the quarantine VLAN).
"""

from __future__ import annotations

import copy
import json
import re
import shlex
from typing import Any

from gpufabric.fabrics.ethernet.drivers.ssh.dialects import VlanListStyle
from gpufabric.fabrics.ethernet.readers.running_config import parse_vlan_list

from support.ssh_double.base import CliDouble, Reply


class SonicDouble(CliDouble):
    name = "sonic"

    def __init__(self, sample: str, ports: tuple[str, ...], quarantine: int) -> None:
        super().__init__()
        self.db: dict[str, Any] = json.loads(sample)
        self.db.setdefault("PORTCHANNEL", {})
        self.db.setdefault("PORTCHANNEL_MEMBER", {})
        for i, p in enumerate(ports):
            if p.startswith("PortChannel"):  # what `config portchannel add` writes (admin up, mtu 9100)
                self.db["PORTCHANNEL"][p] = {"admin_status": "down", "mtu": "9100"}
            else:
                self.db["PORT"][p] = {"admin_status": "down", "alias": f"Eth{100 + i}/1", "mtu": "9100", "speed": "100000"}
        self._vlan_add(quarantine)
        for p in ports:
            self.db["VLAN_MEMBER"][f"Vlan{quarantine}|{p}"] = {"tagging_mode": "untagged"}

    def _portchannel_member(self, verb: str, pc: str, port: str) -> Reply:
        """``config portchannel member add|del``: a member is a PORT in no VLAN and in one
        PortChannel at a time (sonic-utilities config/main.py add_portchannel_member refuses a
        VLAN member and a member of another, with these messages)."""
        if pc not in self.db["PORTCHANNEL"]:
            return Reply(err=f"Error: {pc} is not present.\n", status=2)
        if port not in self.db["PORT"]:
            return Reply(err=f"Error: {port} is invalid!\n", status=2)
        members = self.db["PORTCHANNEL_MEMBER"]
        if verb == "del":
            if f"{pc}|{port}" not in members:
                return Reply(err=f"Error: {port} is not a member of portchannel {pc}\n", status=2)
            del members[f"{pc}|{port}"]
            return Reply()
        if vlan := next((k.partition("|")[0] for k in self.db["VLAN_MEMBER"] if k.endswith(f"|{port}")), None):
            return Reply(err=f"Error: {port} Interface configured as VLAN_MEMBER under vlan : {vlan}\n", status=2)
        if other := next((k for k in members if k.endswith(f"|{port}")), None):
            return Reply(err=f"Error: {port} Interface is already member of {other.partition('|')[0]} \n", status=2)
        members[f"{pc}|{port}"] = {}
        return Reply()

    def _vlan_add(self, vid: int) -> Reply:
        if f"Vlan{vid}" in self.db["VLAN"]:
            return Reply(err=f"Error: Vlan{vid} already exists\n", status=2)
        self.db["VLAN"][f"Vlan{vid}"] = {"vlanid": str(vid)}
        return Reply()

    def _port(self, name: str) -> Reply | None:
        if name not in self.db["PORT"] and name not in self.db.get("PORTCHANNEL", {}):
            return Reply(err=f"Error: Interface name {name} is invalid!!\n", status=2)
        return None

    def command(self, line: str) -> Reply:
        m = re.fullmatch(r"sonic-db-cli CONFIG_DB EXISTS 'VLAN\|Vlan(\d+)' \| grep -qx 1 \|\| sudo config vlan add (\d+)", line)
        if m:
            return Reply() if f"Vlan{m[1]}" in self.db["VLAN"] else self._vlan_add(int(m[2]))
        if line == "show runningconfiguration all":
            return Reply(json.dumps(self.db, indent=4, sort_keys=True) + "\n")
        w = shlex.split(line)
        if w[:1] == ["sudo"]:
            w = w[1:]
        if w == ["config", "save", "-y"]:
            return Reply("Running command: /usr/local/bin/sonic-cfggen -d --print-data > /etc/sonic/config_db.json\n")
        if w[:3] == ["config", "vlan", "add"] and len(w) == 4:
            return self._vlan_add(int(w[3]))
        if w[:2] == ["config", "interface"] and len(w) == 4 and w[2] in ("startup", "shutdown"):
            bad = self._port(w[3])
            if bad:
                return bad
            table = "PORT" if w[3] in self.db["PORT"] else "PORTCHANNEL"
            self.db[table][w[3]]["admin_status"] = "up" if w[2] == "startup" else "down"
            return Reply()
        if w[:3] == ["config", "portchannel", "member"] and len(w) == 6 and w[3] in ("add", "del"):
            return self._portchannel_member(w[3], w[4], w[5])
        if w[:3] == ["config", "vlan", "member"] and len(w) in (6, 7) and w[3] in ("add", "del"):
            verb, untagged = w[3], "-u" in w
            vid, port = [x for x in w[4:] if x != "-u"]
            bad = self._port(port)
            if bad:
                return bad
            key = f"Vlan{vid}|{port}"
            if f"Vlan{vid}" not in self.db["VLAN"]:
                return Reply(err=f"Error: Vlan{vid} doesn't exist\n", status=2)
            members = self.db["VLAN_MEMBER"]
            if verb == "del":
                if key not in members:
                    return Reply(err=f"Error: {port} is not a member of Vlan{vid}\n", status=2)
                del members[key]
                return Reply()
            if key in members:
                return Reply(err=f"Error: {port} is already a member of Vlan{vid}\n", status=2)
            if untagged and any(k.endswith(f"|{port}") and a.get("tagging_mode") == "untagged" for k, a in members.items()):
                return Reply(err=f"Error: {port} is already untagged member!\n", status=2)
            members[key] = {"tagging_mode": "untagged" if untagged else "tagged"}
            return Reply()
        return Reply(err=f"Usage: config [OPTIONS] COMMAND [ARGS]...\nError: No such command {line!r}.\n", status=2)


NV_IFNAME = re.compile(r"^(?:swp\d+(?:s\d)?|eth\d+|lo|bond\d+|peerlink|vlan\d+)$")


class NvueDouble(CliDouble):
    name = "nvue"

    def __init__(self, sample: str, ports: tuple[str, ...], quarantine: int) -> None:
        super().__init__()
        doc = json.loads(sample)
        self.header = next(d for d in doc if "header" in d)
        self.applied: dict[str, Any] = next(d for d in doc if "set" in d)["set"]
        dom = self.applied["bridge"]["domain"]["br_default"]
        dom["vlan"][str(quarantine)] = {}
        for p in ports:
            self.applied["interface"][p] = {"bridge": {"domain": {"br_default": {"access": quarantine}}},
                                            "link": {"state": "down"}, "type": "bond" if p.startswith("bond") else "swp"}  # fmt: skip
        self.pending: dict[str, Any] | None = None  # staged, survives the session like NVUE's pending revision

    def _stage(self) -> dict[str, Any]:
        if self.pending is None:
            self.pending = copy.deepcopy(self.applied)
        return self.pending

    def command(self, line: str) -> Reply:
        w = line.split()
        if line == "nv config show -o json":
            return Reply(json.dumps([self.header, {"set": self.applied}], indent=2) + "\n")
        if w[:3] == ["nv", "config", "apply"]:
            if self.pending is not None:
                if twice := self._in_two_bonds(self.pending):  # "An interface cannot belong to multiple bonds"
                    return Reply(err=f"Config invalid at interface.{twice}: an interface cannot belong to multiple bonds\n", status=1)
                self.applied, self.pending = self.pending, None
            return Reply("applied [rev_id: 7]\n")
        if w == ["nv", "config", "save"]:
            return Reply()
        if w == ["nv", "config", "detach"]:
            self.pending = None
            return Reply()
        if w[:4] == ["nv", "set", "bridge", "domain"] and len(w) == 7 and w[5] == "vlan":
            vl = self._stage()["bridge"]["domain"].setdefault(w[4], {}).setdefault("vlan", {})
            for part in w[6].split(","):
                vl.setdefault(part, {})
            return Reply()
        if w[:3] in (["nv", "set", "interface"], ["nv", "unset", "interface"]) and len(w) >= 5:
            if not NV_IFNAME.match(w[3]):
                return Reply(err=f"Error: Invalid interface name '{w[3]}'\n", status=1)
            cfg = self._stage()["interface"].setdefault(w[3], {"type": "swp"})
            return self._interface(w[1] == "set", cfg, w[4:])
        return Reply(err=f"Error: Invalid Command: {line}\n", status=1)

    @staticmethod
    def _in_two_bonds(cfg: dict[str, Any]) -> str:
        seen: dict[str, str] = {}
        for name, attrs in cfg["interface"].items():
            for m in ((attrs or {}).get("bond") or {}).get("member") or {}:
                if m in seen:
                    return str(m)
                seen[m] = name
        return ""

    @staticmethod
    def _interface(is_set: bool, cfg: dict[str, Any], rest: list[str]) -> Reply:
        if rest[:2] == ["link", "state"] and is_set and len(rest) == 3:
            cfg.setdefault("link", {})["state"] = rest[2]
            return Reply()
        if rest[:2] == ["bond", "member"] and len(rest) == 3:  # the bond's member list (bond1: bond: member: {swp1: {}})
            cfg["type"] = "bond"
            members = cfg.setdefault("bond", {}).setdefault("member", {})
            if is_set:
                members[rest[2]] = {}
            else:
                members.pop(rest[2], None)
            return Reply()
        if rest[:2] == ["bond", "mode"] and is_set and len(rest) == 3 and rest[2] in ("lacp", "static"):
            cfg.setdefault("bond", {})["mode"] = rest[2]
            return Reply()
        if rest[:2] != ["bridge", "domain"] or len(rest) < 3:
            return Reply(err=f"Error: Invalid Command: {' '.join(rest)}\n", status=1)
        doms = cfg.setdefault("bridge", {}).setdefault("domain", {})
        if not is_set:
            doms.pop(rest[2], None)
            return Reply()
        d = doms.setdefault(rest[2], {})
        if len(rest) == 5 and rest[3] == "access":
            d["access"] = int(rest[4])
        elif len(rest) == 5 and rest[3] == "untagged":
            d["untagged"] = rest[4] if rest[4] == "none" else int(rest[4])
        elif len(rest) == 5 and rest[3] == "vlan":
            d.setdefault("vlan", {}).update({k: {} for k in VlanListStyle().format(parse_vlan_list(rest[4])).split(",")})
        else:
            return Reply(err=f"Error: Invalid Command: {' '.join(rest)}\n", status=1)
        return Reply()
