"""Double of the Dell OS9 (FTOS) CLI (NOT Dell's software), written from the OS9 configuration
guide and the recorded sample tests/fixtures/ssh/os9/running-config.txt.

What it holds to, as OS9 does: VLAN membership lives on ``interface Vlan N`` (``untagged`` /
``tagged`` member lists, printed with ranges); a port joins a VLAN only as a ``switchport``;
a port is untagged in at most one VLAN (``untagged`` while untagged elsewhere is refused, as
OS9 refuses it); untagged AND tagged needs ``portmode hybrid``; ``portmode`` and ``no
switchport`` are refused while the port is a switchport / in a VLAN; a port-channel member
(``channel-member`` on the port-channel, or ``port-channel-protocol LACP`` entering the LACP
context for ``port-channel N mode active``) must be neither, nor in another channel. Line by line, like a
PTY-less shell: a failing line prints an error and the next lines still run.
"""

from __future__ import annotations

import re

from gpufabric.fabrics.ethernet.drivers.ssh.dialects import VlanListStyle
from gpufabric.fabrics.ethernet.readers.os9 import expand_members

from support.ssh_double.base import CliDouble, Reply

_IFACE = re.compile(r"^interface\s+([A-Za-z][A-Za-z-]*)\s*(\d[\d/]*)$", re.IGNORECASE)


def _cli(port: str) -> str:
    return re.sub(r"^([A-Za-z-]+?)(\d)", r"\1 \2", port, count=1)


class Os9Double(CliDouble):
    name = "os9"

    def __init__(self, sample: str, ports: tuple[str, ...], quarantine: int) -> None:
        super().__init__()
        self.blocks: dict[str, list[str]] = {}
        self.members: dict[int, dict[str, bool]] = {}  # vlan -> port -> tagged
        self._load(sample)
        for p in ports:
            self.blocks[p] = ["no ip address", "switchport", "shutdown"]
            self.members.setdefault(quarantine, {})[p] = False
        self.config = False
        self.context: tuple[str, str] | None = None  # ("vlan", "N") | ("port", name)
        self.lacp = False  # in a port's "port-channel-protocol LACP" context

    def _load(self, text: str) -> None:
        ctx: tuple[str, str] | None = None
        for raw in text.splitlines():
            s = raw.strip()
            if m := _IFACE.match(s):
                if m[1].lower() == "vlan":
                    ctx = ("vlan", m[2])
                    self.members.setdefault(int(m[2]), {})
                else:
                    ctx = ("port", f"{m[1]}{m[2]}")
                    self.blocks[ctx[1]] = []
            elif ctx and raw[:1] == " " and s and not s.startswith("!"):
                w = s.split()
                if ctx[0] == "vlan" and w[0] in ("tagged", "untagged"):
                    for p in expand_members(w[1:]):
                        self.members[int(ctx[1])][p] = w[0] == "tagged"
                elif ctx[0] == "port":
                    self.blocks[ctx[1]].append(s)
            elif s and not s.startswith("!"):
                ctx = None

    # ---- the rules OS9 enforces
    def _in_vlans(self, port: str) -> dict[int, bool]:
        return {v: t for v, ms in self.members.items() if port in ms for t in (ms[port],)}

    def _member(self, vlan: int, verb: str, spec: list[str]) -> Reply:
        ports = expand_members(spec)
        if not ports or any(p not in self.blocks for p in ports):
            return Reply(f"% Error: No such interface {' '.join(spec)}.\n")
        for p in ports:
            tagged = verb.endswith("tagged") and not verb.endswith("untagged")
            if verb.startswith("no "):
                if self.members[vlan].get(p) is not tagged:
                    return Reply(f"% Error: {_cli(p)} is not a member of Vlan {vlan}.\n")
                del self.members[vlan][p]
                continue
            if "switchport" not in self.blocks[p]:
                return Reply("% Error: Port is not in Layer-2 mode.\n")
            others = {v: t for v, t in self._in_vlans(p).items() if v != vlan}
            if not tagged and any(not t for t in others.values()):
                return Reply("% Error: Port is untagged in another Vlan.\n")
            mixed = (not tagged and any(others.values())) or (tagged and any(not t for t in others.values()))
            if mixed and "portmode hybrid" not in self.blocks[p]:
                return Reply(f"% Error: {_cli(p)} Port is not in Hybrid mode.\n")
            self.members[vlan][p] = tagged
        return Reply()

    def _lag_member(self, port: str) -> Reply | None:
        """OS9 refuses a port-channel member with configuration of its own: "Only the shutdown,
        description, mtu, and ip mtu commands can be configured on an interface if it is added to a
        Port Channel"; "An interface can belong to only one Port Channel"."""
        if port not in self.blocks:
            return Reply(f"% Error: No such interface {_cli(port)}.\n")
        body = self.blocks[port]
        if "switchport" in body or self._in_vlans(port):
            return Reply(f"% Error: Port is in Layer-2 mode {_cli(port)}.\n")
        if any(ln.startswith(("port-channel ", "port-channel-protocol")) for ln in body) or any(
            f"channel-member {_cli(port)}" in b for b in self.blocks.values()
        ):
            return Reply(f"% Error: {_cli(port)} is already part of a port-channel.\n")
        return None

    def _port_line(self, port: str, line: str) -> Reply:
        body = self.blocks[port]
        if self.lacp:  # LACP context: "port-channel N mode active|passive"
            if re.fullmatch(r"port-channel \d+ mode (active|passive)", line):
                if f"Port-channel{line.split()[1]}" not in self.blocks:
                    return Reply(f"% Error: No such interface Port-channel {line.split()[1]}.\n")
                body[:] = [x for x in body if not x.startswith("port-channel ")] + [line]
                return Reply()
            return Reply("% Invalid input detected at '^' marker.\n")
        if line == "port-channel-protocol LACP":
            if "port-channel-protocol LACP" not in body:
                if bad := self._lag_member(port):
                    return bad
                body.append(line)
            self.lacp = True
            return Reply()
        if line.startswith("channel-member ") and port.lower().startswith("port-channel"):
            members = expand_members(line.split()[1:])
            for m in members:
                if bad := self._lag_member(m):
                    return bad
            body.append(line)
            return Reply()
        if line in ("shutdown", "no shutdown"):
            body[:] = [x for x in body if x not in ("shutdown", "no shutdown")] + [line]
        elif line == "switchport":
            if line not in body:
                body.insert(len([x for x in body if x != "shutdown" and x != "no shutdown"]), line)
        elif line == "no switchport":
            if self._in_vlans(port):
                return Reply("% Error: Port is a member of a non-default VLAN.\n")
            body[:] = [x for x in body if x != "switchport"]
        elif line in ("portmode hybrid", "no portmode hybrid"):
            if "switchport" in body:
                return Reply(f"% Error: Port is in Layer-2 mode {_cli(port)}.\n")
            body[:] = [x for x in body if x != "portmode hybrid"]
            if line == "portmode hybrid":
                body.insert(1 if body[:1] == ["no ip address"] else 0, line)
        else:
            return Reply("% Invalid input detected at '^' marker.\n")
        return Reply()

    # ---- the CLI
    def begin_session(self) -> None:
        self.config, self.context, self.lacp = False, None, False

    def command(self, line: str) -> Reply:
        line = line.strip()
        if not line or line == "terminal length 0":
            return Reply()
        if line == "show running-config" and not self.config:
            return Reply(self.show())
        if line == "write memory" and not self.config:
            return Reply("Copy completed successfully.\n")
        if line == "configure terminal":
            self.config, self.context = True, None
            return Reply()
        if not self.config:
            return Reply("% Invalid input detected at '^' marker.\n")
        if line == "end":
            self.config, self.context, self.lacp = False, None, False
            return Reply()
        if line == "exit":
            if self.lacp:
                self.lacp = False
            else:
                self.context = None
            return Reply()
        if m := _IFACE.match(line):
            self.lacp = False
            if m[1].lower() == "vlan":
                self.members.setdefault(int(m[2]), {})
                self.context = ("vlan", m[2])
            elif f"{m[1]}{m[2]}" in self.blocks:
                self.context = ("port", f"{m[1]}{m[2]}")
            else:
                self.context = None
                return Reply(f"% Error: No such interface {m[1]} {m[2]}.\n")
            return Reply()
        w = line.split()
        if self.context and self.context[0] == "vlan":
            verb = " ".join(w[:2]) if w[0] == "no" else w[0]
            if verb in ("tagged", "untagged", "no tagged", "no untagged"):
                return self._member(int(self.context[1]), verb, w[len(verb.split()) :])
        elif self.context:
            return self._port_line(self.context[1], line)
        return Reply("% Invalid input detected at '^' marker.\n")

    def show(self) -> str:
        out = ["Current Configuration ...", "! Version 9.14(2.4)", "!", "hostname leaf", "!"]
        for name, body in self.blocks.items():
            out += [f"interface {_cli(name)}", *(f" {x}" for x in body), "!"]
        for vlan in sorted(self.members):
            out += [f"interface Vlan {vlan}", " no ip address"]
            for kw, tagged in (("tagged", True), ("untagged", False)):
                groups: dict[tuple[str, str], set[int]] = {}
                for p, t in self.members[vlan].items():
                    if t is tagged and (m := re.fullmatch(r"([A-Za-z-]+?)((?:\d+/)*)(\d+)", p)):
                        groups.setdefault((m[1], m[2]), set()).add(int(m[3]))
                for (kind, prefix), nums in sorted(groups.items()):
                    first, *rest = VlanListStyle().format(nums).split(",")
                    out.append(f" {kw} {kind} {prefix}{','.join([first, *rest])}")
            out.append("!")
        out.append("end")
        return "\n".join(out) + "\n"
