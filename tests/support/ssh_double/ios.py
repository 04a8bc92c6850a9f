"""Doubles of the IOS-like CLIs: Cisco NX-OS, Arista EOS, Dell OS10 (NOT the vendors' software).

The running config is kept as the switch keeps it: one block of lines per interface, edited
command by command (``switchport access vlan N`` replaces the line of that key, ``no ...``
removes it, OS10's ``switchport trunk allowed vlan N`` ADDS to the list), and printed by
``show running-config[uration] interface`` in the vendor's layout (indentation, ``!``
separators, default lines hidden as each vendor hides them). The CLI is fed line by line,
as through a PTY-less shell: a failing line prints an error and the next lines still run.
NX-OS and EOS also answer ``show interface(s) [switchport] | json`` (:mod:`.iosjson`).
EOS configuration sessions: ``configure session S`` edits a copy of the configuration, which
``end`` (or the session closing) leaves pending; ``configure session S commit`` makes it the
running configuration, ``configure session S abort`` drops it. NX-OS checkpoint files:
``checkpoint file F`` saves the running configuration, ``rollback running-config file F``
restores it, ``delete F`` removes the file (``terminal dont-ask`` accepted). ``refuse`` holds lines the
switch refuses (a test's stand-in for a line the platform rejects that the driver cannot check
beforehand).
Initial state: the recorded sample tests/fixtures/ssh/<dialect>/running-config.txt plus
provisioned ports (L2, shut down, parked in the quarantine VLAN).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpufabric.fabrics.ethernet.drivers.ssh.dialects import VlanListStyle
from gpufabric.fabrics.ethernet.readers.running_config import parse_vlan_list

from support.ssh_double.base import CliDouble, Reply
from support.ssh_double.iosjson import JSON_SHOW, show_json


@dataclass(frozen=True)
class IosVendor:
    name: str
    indent: str
    separator: str  # "" (blank line) or "!"
    show: tuple[str, ...]  # accepted read commands
    order: tuple[str, ...]  # line keys in display order
    hides: tuple[str, ...]  # lines the vendor never prints (defaults)
    allowed_adds: bool  # "switchport trunk allowed vlan N" adds (OS10) instead of replacing
    bad_interface: str
    bad_command: str
    save: dict[str, str]


_COMMON_ORDER = ("description", "switchport", "switchport mode", "switchport access vlan", "no switchport access vlan",
                 "switchport trunk native vlan", "switchport trunk allowed vlan", "spanning-tree", "mtu", "shutdown")  # fmt: skip
VENDORS = {
    "nxos": IosVendor("nxos", "  ", "", ("show running-config interface",), _COMMON_ORDER,
                      ("switchport mode access",), False, "% Invalid interface format at '^' marker.",
                      "% Invalid command at '^' marker.",
                      {"copy running-config startup-config": "[########################################] 100%\nCopy complete.\n"}),
    "eos": IosVendor("eos", "   ", "!", ("show running-config",), _COMMON_ORDER,
                     ("switchport mode access", "no shutdown"), False, "% Invalid input (at token 1: '{token}')",
                     "% Invalid input", {"write memory": "Copy completed successfully.\n"}),
    "os10": IosVendor("os10", " ", "!", ("show running-configuration interface",), _COMMON_ORDER,
                      ("switchport mode access",), True, "% Error: Invalid interface name {token}.",
                      "% Error: Unrecognized command.", {"write memory": ""}),
}  # fmt: skip
_SHUT = re.compile(r"^(no )?shutdown$")


def _key(line: str, order: tuple[str, ...]) -> str | None:
    if _SHUT.match(line):
        return "shutdown"
    if line.startswith("switchport trunk allowed vlan"):
        return "switchport trunk allowed vlan"
    return next((k for k in sorted(order, key=len, reverse=True) if line == k or line.startswith(k + " ")), None)


def _ranges(vs: set[int]) -> str:
    return VlanListStyle().format(vs)


class IosDouble(CliDouble):
    def __init__(self, dialect: str, sample: str, ports: tuple[str, ...], quarantine: int) -> None:
        super().__init__()
        self.v = VENDORS[dialect]
        self.name = dialect
        self.vlans: set[int] = {1}
        self.blocks: dict[str, list[str]] = {}
        self._load(sample)
        for p in ports:
            body = ["switchport"] if dialect == "nxos" else []
            self.blocks[p] = [*body, f"switchport access vlan {quarantine}", "shutdown"]
        self.vlans.add(quarantine)
        self.config = False
        self.context: str | None = None
        self.refuse: set[str] = set()
        self.files: dict[str, tuple[dict[str, list[str]], set[int]]] = {}  # NX-OS checkpoint files
        self.session: str | None = None  # the EOS configuration session being edited
        self.pending: dict[str, tuple[dict[str, list[str]], set[int]]] = {}  # EOS sessions left uncommitted
        self._running: tuple[dict[str, list[str]], set[int]] | None = None  # the running config during a session

    def _leave_session(self) -> None:
        if self.session is not None and self._running is not None:
            self.pending[self.session] = (self.blocks, self.vlans)
            self.blocks, self.vlans = self._running
        self.session, self._running = None, None

    def _session_command(self, name: str, action: str) -> Reply:
        if action == "":  # enter (or re-enter) the session: edit its copy
            self._leave_session()
            self._running = (self.blocks, self.vlans)
            blocks, vlans = self.pending.pop(name, (self.blocks, self.vlans))
            self.blocks, self.vlans = {k: list(v) for k, v in blocks.items()}, set(vlans)
            self.session, self.config, self.context = name, True, None
        elif action == "commit" and name in self.pending:
            self.blocks, self.vlans = self.pending.pop(name)
        elif action == "abort":
            self.pending.pop(name, None)
        else:
            return Reply(f"% Session {name} not found\n")
        return Reply()

    def _checkpoint_command(self, line: str) -> Reply | None:
        if line in ("terminal dont-ask", "no terminal dont-ask"):
            return Reply()
        if m := re.fullmatch(r"checkpoint file (\S+)", line):
            self.files[m[1]] = ({k: list(v) for k, v in self.blocks.items()}, set(self.vlans))
            return Reply("Done\n")
        if m := re.fullmatch(r"rollback running-config file (\S+)", line):
            if m[1] not in self.files:
                return Reply(f"ERROR: {m[1]}: No such file or directory\n")
            blocks, vlans = self.files[m[1]]
            self.blocks, self.vlans = {k: list(v) for k, v in blocks.items()}, set(vlans)
            return Reply("Rollback Patch is Empty\nRollback completed successfully.\n")
        if m := re.fullmatch(r"delete (\S+)", line):
            return Reply() if self.files.pop(m[1], None) else Reply(f"ERROR: {m[1]}: No such file or directory\n")
        return None

    def end_session(self) -> Reply:
        self._leave_session()
        return Reply()

    def _load(self, text: str) -> None:
        name: str | None = None
        for raw in text.splitlines():
            m = re.match(r"^interface\s+(\S+)\s*$", raw.rstrip())
            if m:
                name = m[1]
                self.blocks[name] = []
            elif name is not None and raw[:1] in (" ", "\t") and raw.strip():
                self.blocks[name].append(raw.strip())
            elif raw.strip() and not raw.startswith("!"):
                name = None
                if raw.startswith("vlan "):
                    self.vlans |= parse_vlan_list(raw[5:])

    # ---- state edits
    def _put(self, port: str, line: str) -> None:
        body = self.blocks[port]
        key = _key(line, self.v.order)
        if key is not None:
            body[:] = [x for x in body if _key(x, self.v.order) != key]
        if line in self.v.hides:
            return
        rank = self.v.order.index(key) if key in self.v.order else len(self.v.order)
        at = next((i for i, x in enumerate(body) if (k := _key(x, self.v.order)) in self.v.order and self.v.order.index(k) > rank), len(body))
        body.insert(at, line)

    def _allowed(self, port: str) -> set[int]:
        line = next((x for x in self.blocks[port] if x.startswith("switchport trunk allowed vlan ")), None)
        return set(parse_vlan_list(line.split()[-1])) if line else set()

    def _interface_line(self, port: str, line: str) -> Reply:
        w = line.split()
        if line == "switchport" and self.name == "nxos":
            if "switchport" not in self.blocks[port]:
                self._put(port, line)
        elif line in ("shutdown", "no shutdown") or re.fullmatch(r"switchport mode (access|trunk)", line):
            self._put(port, line)
        elif re.fullmatch(r"switchport (access|trunk native) vlan \d+", line):
            self._put(port, line)
            if self.name == "os10" and w[1] == "access":
                self.blocks[port] = [x for x in self.blocks[port] if x != "no switchport access vlan"]
        elif m := re.fullmatch(r"channel-group (\d+)( force)? mode (active|on|passive)", line):
            # a member joins a port-channel; the config shows it without 'force' (NX-OS)
            if m[2] and self.name != "nxos":
                return Reply(self.v.bad_command + "\n")
            self.blocks[port] = [x for x in self.blocks[port] if not x.startswith("channel-group ")]
            self.blocks[port].append(f"channel-group {m[1]} mode {m[3]}")
        elif line == "no switchport access vlan" and self.name == "os10":
            self._put(port, line)
        elif re.fullmatch(r"switchport trunk allowed vlan [\d,-]+", line):
            new = set(parse_vlan_list(w[-1]))
            self._put(port, f"switchport trunk allowed vlan {_ranges(self._allowed(port) | new if self.v.allowed_adds else new)}")
        elif re.fullmatch(r"no switchport trunk allowed vlan [\d,-]+", line) and self.v.allowed_adds:
            left = self._allowed(port) - set(parse_vlan_list(w[-1]))
            self.blocks[port] = [x for x in self.blocks[port] if not x.startswith("switchport trunk allowed vlan")]
            if left:
                self._put(port, f"switchport trunk allowed vlan {_ranges(left)}")
        else:
            return Reply(self.v.bad_command + "\n")
        return Reply()

    # ---- the CLI
    def begin_session(self) -> None:
        self.config, self.context = False, None

    def command(self, line: str) -> Reply:
        line = line.strip()
        if not line or line == "terminal length 0":
            return Reply()
        if line in self.v.show:
            return Reply(self.show())
        if line in JSON_SHOW.get(self.name, ()) and not self.config:
            return Reply(show_json(self.name, line, self.blocks))
        if line in self.v.save and not self.config:
            return Reply(self.v.save[line])
        if line == "configure terminal":
            self.config, self.context = True, None
            return Reply()
        if self.name == "nxos" and not self.config and (r := self._checkpoint_command(line)) is not None:
            return r
        m = re.fullmatch(r"configure session (\S+)(?: (commit|abort))?", line)
        if m and self.name == "eos" and (not m[2] or not self.config):
            return self._session_command(m[1], m[2] or "")
        if not self.config:
            return Reply(self.v.bad_command + "\n")
        if line in self.refuse:
            return Reply(self.v.bad_command + "\n")
        if line == "end":
            self.config, self.context = False, None
            self._leave_session()
            return Reply()
        if line == "exit":
            self.context = None
            return Reply()
        m = re.fullmatch(r"vlan ([\d,-]+)", line) or re.fullmatch(r"interface vlan (\d+)", line)
        if m and self.context is None:
            self.vlans |= parse_vlan_list(m[1])
            self.context = "vlan"
            return Reply()
        m = re.fullmatch(r"interface (\S+)", line)
        if m:
            if m[1] not in self.blocks:
                self.context = None
                return Reply(self.v.bad_interface.format(token=m[1]) + "\n")
            self.context = m[1]
            return Reply()
        if self.context and self.context != "vlan":
            return self._interface_line(self.context, line)
        return Reply(self.v.bad_command + "\n")

    def show(self) -> str:
        v = self.v
        out: list[str] = []
        if v.name == "nxos":
            out += ["", "!Command: show running-config interface", "!Time: Mon Mar  4 10:15:02 2024", "",
                    "version 10.3(3) Bios:version 05.47", ""]  # fmt: skip
        elif v.name == "eos":
            out += ["! Command: show running-config", "! device: leaf (DCS-7050CX3-32S, EOS-4.30.2F)", "!",
                    "hostname leaf", "!", f"vlan {_ranges(self.vlans - {1})}", "!"]  # fmt: skip
        for name, body in self.blocks.items():
            if v.separator == "!" and v.name == "os10":
                out.append("!")
            out.append(f"interface {name}")
            out += [v.indent + line for line in body]
            out.append("!" if v.name == "eos" else "")
        if v.name == "eos":
            out.append("end")
        return "\n".join(out) + "\n"
