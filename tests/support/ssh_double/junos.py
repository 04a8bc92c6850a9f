"""A double of the Juniper Junos CLI, set-style (NOT Junos): the configuration is the list
of ``set`` statements ``show configuration ... | display set`` prints.

``configure private`` opens a private candidate (a copy); ``set`` adds a statement (single-
valued leaves such as ``interface-mode``, ``native-vlan-id`` and ``vlan-id`` replace their old
value; ``vlan members [ a b ]`` adds each member); ``delete`` removes every statement under the
given path; ``commit and-quit`` makes the candidate the active configuration. Groups: a
``groups G interfaces <pattern> ...`` statement applies, with ``apply-groups G``, to every
configured interface the wildcard matches, below the interface's own single-valued leaves;
``show configuration ... | display inheritance | display set`` prints the inherited statements
as the interface's own, the plain ``| display set`` does not. As in a
non-interactive Junos CLI, a line that fails (a malformed interface name) prints ``error:``
and the following lines, and the commit, still run. Initial state: the recorded sample
tests/fixtures/ssh/junos/running-config.txt plus provisioned ports (disabled, access, in the
quarantine VLAN).
"""

from __future__ import annotations

import fnmatch
import re

from support.ssh_double.base import CliDouble, Reply

IFNAME = re.compile(r"^(?:(?:ge|xe|et|mge)-\d+/\d+/\d+|ae\d+|lo0|em\d|irb|vme)$")
SINGLE = ("interface-mode", "port-mode", "native-vlan-id", "vlan-id", "description", "802.3ad")  # 802.3ad: one ae per member
READS = tuple(
    f"show configuration {top} |{inherit} display set"
    for top in ("interfaces", "vlans")
    for inherit in ("", " display inheritance |")
)


def _expand(words: list[str]) -> list[list[str]]:
    """``... vlan members [ 200 300 ]`` -> one statement per member."""
    if "[" in words and words[-1] == "]":
        i = words.index("[")
        return [[*words[:i], m] for m in words[i + 1 : -1]]
    return [words]


class JunosDouble(CliDouble):
    name = "junos"

    def __init__(self, sample: str, ports: tuple[str, ...], quarantine: int) -> None:
        super().__init__()
        self.active: list[tuple[str, ...]] = [tuple(ln.split()[1:]) for ln in sample.splitlines() if ln.startswith("set ")]
        self.active.append(("vlans", f"gpf{quarantine}", "vlan-id", str(quarantine)))
        for p in ports:
            fam = ("interfaces", p, "unit", "0", "family", "ethernet-switching")
            self.active += [("interfaces", p, "disable"), (*fam, "interface-mode", "access"),
                            (*fam, "vlan", "members", str(quarantine))]  # fmt: skip
        self.candidate: list[tuple[str, ...]] | None = None

    def _inherited(self) -> list[tuple[str, ...]]:
        """The active configuration with the applied groups' interface statements inherited."""
        applied = {s[1] for s in self.active if s[0] == "apply-groups" and len(s) == 2}
        own = [s for s in self.active if s[0] == "interfaces"]
        names = {s[1] for s in own}
        out = list(self.active)
        for g in self.active:
            if len(g) < 5 or g[0] != "groups" or g[1] not in applied or g[2] != "interfaces":
                continue
            for name in sorted(n for n in names if fnmatch.fnmatchcase(n, g[3].strip("<>"))):
                st = ("interfaces", name, *g[4:])
                leaf = next((i for i, w in enumerate(st) if w in SINGLE), None)
                if leaf is not None and any(o[: leaf + 1] == st[: leaf + 1] for o in own):
                    continue  # the interface's own value wins
                if st not in out:
                    out.append(st)
        return out

    def begin_session(self) -> None:
        self.candidate = None

    def _set(self, words: list[str]) -> Reply:
        if len(words) >= 2 and words[0] == "interfaces" and not IFNAME.match(words[1]):
            return Reply(f"error: invalid interface type in '{words[1]}'\n")
        assert self.candidate is not None
        for st in _expand(words):
            leaf = next((i for i, w in enumerate(st) if w in SINGLE), None)
            if leaf is not None:
                prefix = tuple(st[: leaf + 1])
                self.candidate = [s for s in self.candidate if s[: leaf + 1] != prefix]
            if tuple(st) not in self.candidate:
                self.candidate.append(tuple(st))
        return Reply()

    def _delete(self, words: list[str]) -> Reply:
        assert self.candidate is not None
        n = len(words)
        before = len(self.candidate)
        self.candidate = [s for s in self.candidate if tuple(s[:n]) != tuple(words)]
        return Reply("warning: statement not found\n" if len(self.candidate) == before else "")

    def command(self, line: str) -> Reply:
        line = line.strip()
        if line in READS:
            top = "interfaces" if "interfaces" in line else "vlans"
            shown = self._inherited() if "display inheritance" in line else self.active
            return Reply("".join("set " + " ".join(s) + "\n" for s in shown if s[0] == top))
        if line == "configure private":
            self.candidate = list(self.active)
            return Reply("warning: uncommitted changes will be discarded on exit\nEntering configuration mode\n")
        if self.candidate is None:
            return Reply(f"unknown command: {line.split()[0] if line else ''}\n")
        w = line.split()
        if w[:1] == ["set"]:
            return self._set(w[1:])
        if w[:1] == ["delete"]:
            return self._delete(w[1:])
        if line in ("commit and-quit", "commit"):
            self.active = list(self.candidate)
            if line == "commit and-quit":
                self.candidate = None
            return Reply("commit complete\nExiting configuration mode\n")
        return Reply(f"syntax error, expecting <command>: {w[0]}\n")
