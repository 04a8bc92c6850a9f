"""Switch CLI dialects as data, and the pure renderer of a batch of port changes.

A :class:`Dialect` is loaded from ``dialects/<name>.yaml`` next to this module: command
templates (enter/exit config, per-port access/trunk/quarantine lines, admin up/down,
per-VLAN membership adds/removes, commit/save), how the batch travels (``exec``: one SSH
exec request running a script; ``shell``: the commands written to the stdin of a shell
channel without a PTY, so no prompt matching is needed), the regexes that mean a command
failed, and which pure parser reads the running config back.

:func:`render_batch` turns desired :class:`EthernetPortConfig` values (plus, for dialects
whose CLI adds to VLAN lists instead of replacing them, the current state) into the
exact command lines of one session. It does no I/O; golden files pin its output. A dialect
with ``commit`` / ``abort`` templates (EOS configuration sessions, NX-OS checkpoint files) has
them run by the driver in a second session (:func:`render_lines`): commit when the batch printed
no error, abort (undo) when it did.

What each dialect reads back is held against real device outputs where public ones were
found (tests/fixtures/real/ethernet/<dialect>/, tests/unit/test_real_outputs.py): ``nxos``
(10 configs, NX-OS 6.2 - 9.3), ``eos`` (8, EOS 4.19 - 4.26), ``os10`` (1, OS10 10.4, the
only one found) and ``os9`` (3: MXL 9.5, an I/O Aggregator, S6000 9.12). For ``junos`` (``display set``), ``sonic`` and ``nvue`` no running config of
a real device was found in the public repositories searched (NAPALM, batfish, ntc-templates,
ciscoconfparse, Ansible collections' test data): those are pinned by the vendor-documentation
samples of tests/fixtures/ssh/ only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any, Final

import yaml

from gpufabric.domain import values
from gpufabric.domain.errors import ConfigError, ValidationError
from gpufabric.domain.values import PortNaming, VlanId
from gpufabric.fabrics.ethernet.readers.jsonread import JSON_PARSERS
from gpufabric.fabrics.ethernet.readers.ovs_columns import check_port_config
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, PortMode, SwitchState, same_aggregate

DIALECT_DIR: Final = Path(__file__).with_name("dialects")
DIALECTS: Final = tuple(sorted(p.stem for p in DIALECT_DIR.glob("*.yaml")))  # one source: the files

_TEMPLATE_KEYS: Final = (
    "begin",
    "ensure_vlans",
    "ensure_vlan",
    "port_begin",
    "remove_tagged",
    "remove_untagged",
    "access",
    "trunk",
    "trunk_native",
    "trunk_no_native",
    "quarantine",
    "add_untagged",
    "add_tagged",
    "admin_up",
    "admin_down",
    "bond_join",
    "bond_join_static",
    "bond_leave",
    "port_end",
    "end",
    "commit",  # a staged batch (e.g. an EOS config session) is committed by a second session ...
    "abort",  # ... or dropped when the first one printed an error
    "read",
)


@dataclass(frozen=True)
class VlanListStyle:
    """How a list of VLANs is written: separator, range compression, wrapper."""

    sep: str = ","
    ranges: bool = True
    wrap: str = "{}"

    def format(self, vlans: Iterable[int]) -> str:
        vs = sorted(set(vlans))
        if not self.ranges:
            return self.wrap.format(self.sep.join(str(v) for v in vs))
        parts: list[str] = []
        i = 0
        while i < len(vs):
            j = i
            while j + 1 < len(vs) and vs[j + 1] == vs[j] + 1:
                j += 1
            parts.append(str(vs[i]) if i == j else f"{vs[i]}-{vs[j]}")
            i = j + 1
        return self.wrap.format(self.sep.join(parts))


@dataclass(frozen=True)
class Dialect:
    """One vendor CLI, entirely described by data (see ``dialects/*.yaml``)."""

    name: str
    title: str
    transport: str  # "exec" or "shell"
    parser: str  # name of a parser in gpufabric.fabrics.ethernet.readers.running_config
    templates: Mapping[str, tuple[str, ...]]
    errors: tuple[str, ...] = ()
    needs_current: bool = False  # render needs the current state (CLI adds to VLAN lists)
    script_header: tuple[str, ...] = ()  # exec transport: lines run before the commands
    batch_join: str = ""  # non-empty: every rendered piece joined into ONE command line
    batch_wrap: str = "{body}"  # with batch_join: the single command around the joined pieces
    vlan_list: VlanListStyle = field(default_factory=VlanListStyle)
    variables: Mapping[str, str] = field(default_factory=dict)  # defaults, e.g. vsctl, bridge_domain
    options: Mapping[str, Any] = field(default_factory=dict)  # parser options
    runs_here: bool = False  # True only for dialects the test-suite runs for real (ovs)
    # structured read (NX-OS / EOS ``| json``): the commands, and the jsonread parser of their
    # answer; when set the driver reads port state from it instead of the ``read`` text
    json_read: tuple[str, ...] = ()
    json_parser: str = ""
    port_naming: PortNaming | None = None  # ``port_names``: the interface names this CLI accepts

    def lines(self, key: str) -> tuple[str, ...]:
        return self.templates.get(key, ())

    def with_variables(self, **overrides: str) -> Dialect:
        """A copy whose template variables (e.g. ``vsctl``) are overridden."""
        return replace(self, variables={**self.variables, **overrides})

    def error_res(self) -> tuple[re.Pattern[str], ...]:
        return _compile(self.errors)


@cache
def _compile(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.MULTILINE) for p in patterns)


def _tuple(raw: Any, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        return (raw,)
    if isinstance(raw, list) and all(isinstance(x, str) for x in raw):
        return tuple(raw)
    raise ConfigError(where, raw, "a string or a list of strings")


def dialect_from_dict(data: Mapping[str, Any]) -> Dialect:
    """Build a dialect from its YAML mapping (also used by tests for ad-hoc dialects)."""
    name = str(data.get("name", ""))
    transport = data.get("transport")
    if transport not in ("exec", "shell"):
        raise ConfigError(f"dialect {name}.transport", transport, "exec, shell")
    tpl = data.get("templates") or {}
    unknown = set(tpl) - set(_TEMPLATE_KEYS)
    if unknown:
        raise ConfigError(f"dialect {name}.templates", sorted(unknown), ", ".join(_TEMPLATE_KEYS))
    vl = data.get("vlan_list") or {}
    json_read = _tuple(data.get("json_read"), f"dialect {name}.json_read")
    json_parser = str(data.get("json_parser") or "")
    if json_parser not in ("", *JSON_PARSERS) or bool(json_read) != bool(json_parser):
        raise ConfigError(
            f"dialect {name}.json_parser", json_parser or None, f"one of {', '.join(JSON_PARSERS)}, given with json_read"
        )
    try:
        for p in _tuple(data.get("errors"), "errors"):
            re.compile(p)
    except re.error as e:
        raise ConfigError(f"dialect {name}.errors", str(e), "valid regular expressions") from e
    return Dialect(
        name=name,
        title=str(data.get("title", name)),
        transport=transport,
        parser=str(data.get("parser", "")),
        templates={k: _tuple(v, f"dialect {name}.templates.{k}") for k, v in tpl.items()},
        errors=_tuple(data.get("errors"), f"dialect {name}.errors"),
        needs_current=bool(data.get("needs_current", False)),
        script_header=_tuple(data.get("script_header"), f"dialect {name}.script_header"),
        batch_join=str(data.get("batch_join", "")),
        batch_wrap=str(data.get("batch_wrap", "{body}")),
        vlan_list=VlanListStyle(
            sep=str(vl.get("sep", ",")), ranges=bool(vl.get("ranges", True)), wrap=str(vl.get("wrap", "{}"))
        ),
        variables={str(k): str(v) for k, v in (data.get("variables") or {}).items()},
        options=dict(data.get("options") or {}),
        runs_here=bool(data.get("runs_here", False)),
        json_read=json_read,
        json_parser=json_parser,
        port_naming=_port_naming(name, data.get("port_names")),
    )


def _port_naming(name: str, raw: Any) -> PortNaming | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not isinstance(raw.get("pattern"), str) or not raw.get("example"):
        raise ConfigError(f"dialect {name}.port_names", raw, "a mapping with a regex 'pattern' and an 'example'")
    try:
        return PortNaming(name, raw["pattern"], str(raw["example"]))
    except ValidationError as e:
        raise ConfigError(e.field, e.value, e.allowed) from None


@cache
def load_dialect(name: str) -> Dialect:
    """The built-in dialect ``name`` (one of :data:`DIALECTS`)."""
    if name not in DIALECTS:
        raise ValidationError("dialect", name, ", ".join(DIALECTS))
    data = yaml.safe_load((DIALECT_DIR / f"{name}.yaml").read_text())
    return dialect_from_dict(data)



def port_namings(fabrics_yaml: Mapping[str, Any]) -> dict[str, PortNaming]:
    """switch -> the port naming of its dialect, for every switch of every Ethernet instance in a
    ``fabrics.yaml`` mapping (today's ``ethernet:`` list or ``fabrics:`` instances of kind ethernet);
    the ovsdb driver speaks ``ovs`` names; a switch of an unknown dialect is left out."""
    listed = [x for x in fabrics_yaml.get("fabrics") or [] if isinstance(x, Mapping) and x.get("kind") == "ethernet"]
    out: dict[str, PortNaming] = {}
    for e in [*(fabrics_yaml.get("ethernet") or []), *(sw for x in listed for sw in x.get("section") or [])]:
        o = (e or {}).get("options") or {}
        name = "ovs" if (e or {}).get("driver") == "ovsdb" else str(o.get("dialect", ""))
        naming = load_dialect(name).port_naming if name in DIALECTS else None
        if o.get("switch") and naming is not None:
            out[str(o["switch"])] = naming
    return out

# --------------------------------------------------------------------------- rendering
def check_port_name(port: str, naming: PortNaming | None = None, field: str = "port") -> str:
    """A port name a switch reads as that one port: the inventory's own check (the generic safe
    form, and with ``naming`` its dialect's form), made again where a line is rendered."""
    return values.check_port_name(field, port, naming)


def validate_change(c: EthernetPortConfig, quarantine: VlanId | None = None, naming: PortNaming | None = None) -> None:
    """Reject configurations a switch cannot represent unambiguously: a port name the switch's
    dialect (``naming``) would read otherwise (NX-OS ``Ethernet1/1-48``: 48 ports), and (with
    ``quarantine``) any that break the VLAN policy shared with the OVSDB driver: never VLAN 1,
    never the quarantine VLAN as a tenant VLAN, never a VLAN-less port."""
    check_port_name(c.port, naming)
    if quarantine is not None:
        check_port_config(c, quarantine)
    if c.mode is PortMode.ACCESS:
        if c.vlan is None:
            raise ValidationError("vlan", None, "1-4094", f"access port {c.port} needs a VLAN")
        if c.trunks:
            raise ValidationError("trunks", [t.value for t in c.trunks], "empty", f"access port {c.port}")
    elif c.mode is PortMode.TRUNK and not c.trunks:
        raise ValidationError(
            "trunks", [], "at least one VLAN", f"trunk port {c.port} (an empty list means ALL VLANs on many switches)"
        )


def cli_port(dialect: Dialect, port: str) -> str:
    """The port as the dialect's CLI spells it (``{port_cli}``): with the option ``port_space``
    (Dell OS9: ``TenGigabitEthernet 0/1``, ``Port-channel 10``) a space before the first digit;
    inventories name ports without spaces."""
    if dialect.options.get("port_space"):
        return re.sub(r"^([A-Za-z-]+?)(\d)", r"\1 \2", port, count=1)
    return port


def memberships(c: EthernetPortConfig, quarantine: int) -> frozenset[tuple[int, bool]]:
    """(vlan, tagged) pairs a port is a member of; a shut-down port is parked in ``quarantine``."""
    if c.mode is PortMode.SHUTDOWN:
        return frozenset({(quarantine, False)})
    s = {(t.value, True) for t in c.trunks}
    if c.vlan is not None:
        s.add((c.vlan.value, False))
    return frozenset(s)


def render_batch(
    dialect: Dialect,
    changes: Sequence[EthernetPortConfig],
    *,
    quarantine: VlanId,
    current: SwitchState | None = None,
    variables: Mapping[str, str] | None = None,
) -> tuple[str, ...]:
    """The command lines of ONE session applying ``changes`` (ports in the given order).

    ``changes`` carry device port names. ``current`` (needed when ``dialect.needs_current``)
    lets per-VLAN dialects remove stale memberships and skip existing ones.
    """
    if dialect.needs_current and current is None:
        raise ValidationError("current", None, "the switch's current state", f"dialect {dialect.name} needs it")
    for c in changes:
        validate_change(c, quarantine, dialect.port_naming)
    # a member back into its aggregate where the dialect has no membership template (OVS, whose
    # bond members are interfaces of one port): not rendered, so the rest of the batch (a
    # quarantine) is never blocked by it; the plan keeps showing it and the audit reports it
    # (ETH-BOND-MEMBER-OUT)
    changes = [c for c in changes if not c.bond or dialect.lines(_bond_key(c))]
    if not changes:
        return ()
    var = {**dialect.variables, **(variables or {}), "quarantine": str(quarantine.value)}
    q = quarantine.value

    def fmt(key: str, **kw: object) -> list[str]:
        return [line.format(**var, **kw) for line in dialect.lines(key)]

    out: list[str] = fmt("begin")
    needed: set[int] = set()
    for c in changes:
        if c.bond:
            _check_bond(c, dialect.port_naming)
            continue
        needed |= {v for v, _ in memberships(c, q)}
    if needed:
        out += fmt("ensure_vlans", vlans=dialect.vlan_list.format(needed))
    for v in sorted(needed):
        out += fmt("ensure_vlan", vlan=v)
    for c in changes:
        if c.bond:  # a member back into its aggregate: the membership lines only (its VLANs are the channel's)
            out += _render_member(dialect, c, current, q, fmt)
            continue
        want = memberships(c, q)
        old_cfg = current.port(c.port) if current is not None else None
        have = memberships(old_cfg, q) if old_cfg is not None else frozenset()
        if c.mode is PortMode.TRUNK and dialect.options.get("trunk_resets_memberships"):
            # the trunk templates change the port's mode (OS9 portmode hybrid), which the CLI
            # refuses while the port is in any VLAN: leave them all, then join the wanted ones
            removed, have = have, frozenset()
        else:
            removed = have - want
        p = {"port": c.port, "port_cli": cli_port(dialect, c.port)}
        out += fmt("port_begin", **p)
        for v, tagged in sorted(removed):
            out += fmt("remove_tagged" if tagged else "remove_untagged", vlan=v, **p)
        tagged_vlans = [t.value for t in c.trunks]
        if c.mode is PortMode.ACCESS:
            assert c.vlan is not None
            out += fmt("access", vlan=c.vlan.value, **p)
        elif c.mode is PortMode.TRUNK:
            lists = {
                "allowed": dialect.vlan_list.format(tagged_vlans),
                "allowed_all": dialect.vlan_list.format([*tagged_vlans, *([c.vlan.value] if c.vlan else [])]),
            }
            out += fmt("trunk", **lists, **p)
            if c.vlan is not None:
                out += fmt("trunk_native", native=c.vlan.value, **lists, **p)
            else:
                out += fmt("trunk_no_native", **lists, **p)
        else:
            out += fmt("quarantine", **p)
        for v, tagged in sorted(want - have, key=lambda m: (m[1], m[0])):
            out += fmt("add_tagged" if tagged else "add_untagged", vlan=v, **p)
        out += fmt("admin_down" if c.mode is PortMode.SHUTDOWN else "admin_up", **p)
        out += fmt("port_end", **p)
    out += fmt("end")
    if dialect.batch_join:
        return (dialect.batch_wrap.format(**var, body=dialect.batch_join.join(out)),)
    return tuple(out)


def _render_member(
    dialect: Dialect, c: EthernetPortConfig, current: SwitchState | None, q: int, fmt: Callable[..., list[str]]
) -> list[str]:
    """A member back into (or up in) its aggregate. With the current state: a member already in
    it is only brought up (a shut member of a tenant's bond); one in another aggregate leaves it
    first (``bond_leave``); with ``bond_leaves_vlans`` (OS9, SONiC: a member has no VLAN of its
    own) one outside any aggregate leaves its own VLANs first."""
    p = {"port": c.port, "port_cli": cli_port(dialect, c.port)}
    b = {"bond": c.bond, "bond_cli": cli_port(dialect, c.bond), "channel": _channel(c.bond)}
    old = current.port(c.port) if current is not None else None
    lines: list[str] = []
    if old is None or not same_aggregate(old.bond, c.bond):
        if old is not None and old.bond:
            lines += fmt("bond_leave", **p, old_bond=old.bond, old_bond_cli=cli_port(dialect, old.bond))
        elif old is not None and dialect.options.get("bond_leaves_vlans"):
            implicit = dialect.options.get("default_vlan")  # OS9: left by "no switchport", never listed
            for v, tagged in sorted(m for m in memberships(old, q) if m != (implicit, False)):
                lines += fmt("remove_tagged" if tagged else "remove_untagged", vlan=v, **p)
        lines += fmt(_bond_key(c), **p, **b)
    up = fmt("admin_up", **p) if c.mode is not PortMode.SHUTDOWN else []  # the channel is up: so is its member
    return fmt("port_begin", **p) + lines + up + fmt("port_end", **p)


def _bond_key(c: EthernetPortConfig) -> str:
    return "bond_join" if c.bond_mode in ("", "lacp") else "bond_join_static"


def _channel(bond: str) -> str:
    m = re.search(r"(\d+)$", bond)
    return m[1] if m else ""


def _check_bond(c: EthernetPortConfig, naming: PortNaming | None) -> None:
    """A member change names its aggregate (as its dialect names one) by its number (``channel-group N``)."""
    check_port_name(c.bond, naming, "bond")
    if not _channel(c.bond):
        raise ValidationError("bond", c.bond, "an aggregate ending in its number, e.g. Port-Channel10, ae3, bond2")


def render_read(dialect: Dialect, variables: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The command lines that print the running config :func:`parse_running_config` reads."""
    var = {**dialect.variables, **(variables or {})}
    return tuple(line.format(**var) for line in dialect.lines("read"))


def render_lines(dialect: Dialect, key: str, variables: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The command lines of template ``key`` alone (``commit`` / ``abort`` of a staged batch)."""
    var = {**dialect.variables, **(variables or {})}
    return tuple(line.format(**var) for line in dialect.lines(key))


def render_json_read(dialect: Dialect, variables: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The command lines whose ``| json`` answers the dialect's ``json_parser`` reads (or ())."""
    var = {**dialect.variables, **(variables or {})}
    return tuple(line.format(**var) for line in dialect.json_read)


def find_errors(dialect: Dialect, output: str) -> list[str]:
    """Every output line matched by one of the dialect's error patterns."""
    hits: list[str] = []
    for line in output.splitlines():
        if any(r.search(line) for r in dialect.error_res()):
            hits.append(line.rstrip())
    return hits
