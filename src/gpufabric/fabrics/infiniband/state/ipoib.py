"""IPoIB on tenant partitions: the partition options, the broadcast groups they make, and
the multicast-LID budget (pure: parsers and checks, no I/O).

A partition rendered with the ``ipoib`` flag makes OpenSM create its IPv4 broadcast group
``ff1S:401b:<pkey>::ffff:ffff`` (S = scope, 2 = link-local; the PKey with the full-member bit)
at once, without members; an IPoIB child interface on that PKey joins it, and without it
never comes up. Each group takes one multicast LID, and the switches' multicast forwarding
table holds ``MulticastFDBCap`` of them (1,024 on ibsim's switches, from ``smpquery
switchinfo``): OpenSM past that logs errors and the new partitions have no group, so the
driver refuses a layout that needs more before it writes anything.

Options (``infiniband.options.ipoib`` of fabrics.yaml, the subnet's set for every tenant
partition)::

    ipoib: {enabled: true, mtu: 4, rate: 7, sl: 0, scope: 2}

and a network's own, over the subnet's (``network create --option ib-compute.mtu=5``, the API's
``options: {ib-compute: {mtu: 5}}``; :func:`network_options`): ``ipoib`` (true/false: this
network's partition with or without a broadcast group) and the same ``mtu``, ``rate``, ``sl``,
``scope``. The read-back checks a group's MTU and rate where a value was asked for
(:func:`wrong_groups`).

``mtu`` is the IB MTU code (1=256 ... 5=4096), ``rate`` the IB rate code (2=2.5, 3=10,
7=40, 16=100, 17=200, 21=400 Gb/s ...), ``sl`` 0-15, ``scope`` 1-15 (as OpenSM's
partitions.conf takes them). Seen on OpenSM 3.3.23 + ibsim: ``mtu`` and ``rate`` reach the
group (``rate=7`` -> Rate 0x87), ``sl`` and ``scope`` are accepted (no PARSE ERROR) but the
group stayed SL 0, scope 2.

Readers of what OpenSM made: ``saquery -g`` (the SA's group records: from a port that holds
the group's PKey only - OpenSM hides a group from a requester outside its partition, so
the SM's own port sees only the default partition's) and OpenSM's SA database dump
(``sa_db_dump TRUE`` -> ``<dump_files_dir>/opensm-sa.dump``, rewritten after each sweep),
which the driver reads back.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from gpufabric.domain.errors import CapacityError, ConfigError, ValidationError
from gpufabric.fabrics.infiniband.state import PartitionLayout

DEFAULT_SCOPE: Final = 2  # link-local, what IPoIB uses unless told otherwise
MCAST_FDB_CAP_DEFAULT: Final = 1024  # ibsim's switches (and ConnectX/Quantum defaults seen in docs)
DEFAULT_GROUPS: Final = 1  # the default partition's own broadcast group (rendered with ipoib)
IPOIB_PARTITION_LIMIT: Final = MCAST_FDB_CAP_DEFAULT - DEFAULT_GROUPS
RANGES: Final = {"mtu": (1, 5), "rate": (2, 22), "sl": (0, 15), "scope": (1, 15)}


@dataclass(frozen=True)
class IpoibOptions:
    """The IPoIB flags of every tenant partition (see module docstring)."""

    enabled: bool = True
    mtu: int | None = None
    rate: int | None = None
    sl: int | None = None
    scope: int | None = None

    @classmethod
    def parse(cls, raw: object, where: str = "infiniband.options.ipoib") -> IpoibOptions:
        """From fabrics.yaml: None (defaults), a bool (enabled) or a mapping; ConfigError
        naming the field and its range otherwise."""
        if raw is None:
            return cls()
        if isinstance(raw, IpoibOptions):
            return raw
        if isinstance(raw, bool):
            return cls(enabled=raw)
        if not isinstance(raw, Mapping):
            raise ConfigError(where, raw, "a mapping {enabled, mtu, rate, sl, scope} or true/false")
        unknown = set(raw) - {"enabled", *RANGES}
        if unknown:
            raise ConfigError(where, sorted(unknown), "keys enabled, mtu, rate, sl, scope")
        enabled = raw.get("enabled", True)
        if not isinstance(enabled, bool):
            raise ConfigError(f"{where}.enabled", enabled, "true or false")
        vals: dict[str, int | None] = {}
        for k, (lo, hi) in RANGES.items():
            v = raw.get(k)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi):
                raise ConfigError(f"{where}.{k}", v, f"an integer {lo}-{hi}")
            vals[k] = v
        return cls(enabled, vals["mtu"], vals["rate"], vals["sl"], vals["scope"])

    def flags(self) -> str:
        """The partitions.conf header flags (``", ipoib, mtu=4"``), empty when disabled."""
        if not self.enabled:
            return ""
        extra = "".join(f", {k}={v}" for k in RANGES if (v := getattr(self, k)) is not None)
        return ", ipoib" + extra

    def to_options(self) -> dict[str, Any]:
        return {"enabled": self.enabled, **{k: getattr(self, k) for k in RANGES if getattr(self, k) is not None}}


NETWORK_KEYS: Final = ("ipoib", *RANGES)


def network_options(raw: Mapping[str, Any], where: str) -> tuple[tuple[str, int | bool], ...]:
    """A network's own IPoIB settings (see module docstring), sorted by key; a ValidationError
    naming ``<where>.<key>`` and its range otherwise."""
    out: dict[str, int | bool] = {}
    for key, v in raw.items():
        if key == "ipoib":
            if not isinstance(v, bool):
                raise ValidationError(f"{where}.ipoib", v, "true or false")
        elif key in RANGES:
            lo, hi = RANGES[key]
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValidationError(f"{where}.{key}", v, f"an integer {lo}-{hi}")
        else:
            raise ValidationError(f"{where}.{key}", v, f"one of the keys {', '.join(NETWORK_KEYS)}")
        out[str(key)] = v
    return tuple(sorted(out.items()))


def partition_flags(subnet: IpoibOptions, ipoib: bool, qos: Iterable[tuple[str, int]]) -> str:
    """A tenant partition's partitions.conf flags: the subnet's IPoIB options with the
    partition's own ``qos`` over them; empty without IPoIB (subnet or partition)."""
    if not subnet.enabled or not ipoib:
        return ""
    own = dict(qos)
    vals = {k: own.get(k, getattr(subnet, k)) for k in RANGES}
    return ", ipoib" + "".join(f", {k}={v}" for k, v in vals.items() if v is not None)


def group_qos(subnet: IpoibOptions, layout: PartitionLayout) -> dict[int, dict[str, int]]:
    """15-bit PKey -> the MTU and rate its broadcast group must carry (the partition's own over
    the subnet's; only those asked for), for every IPoIB partition of ``layout``."""
    out: dict[int, dict[str, int]] = {}
    for p in layout.partitions:
        own = dict(p.qos)
        want = {k: v for k in ("mtu", "rate") if (v := own.get(k, getattr(subnet, k))) is not None}
        if p.ipoib and want:
            out[p.pkey.value & 0x7FFF] = want
    return out


def wrong_groups(wanted: Mapping[int, Mapping[str, int]], groups: Iterable[McGroup]) -> list[str]:
    """Broadcast groups whose MTU or rate (their low 6 bits: the SA's selector is above) is not
    the one ``wanted`` (15-bit PKey -> {"mtu": code, "rate": code}) asks for."""
    out = []
    for g in groups:
        want = wanted.get(g.pkey & 0x7FFF) if g.is_ipv4_broadcast else None
        for key, have in (("mtu", g.mtu & 0x3F), ("rate", g.rate & 0x3F)):
            if want and key in want and want[key] != have:
                out.append(f"{g.mgid} {key} {have} (asked {want[key]})")
    return out


def broadcast_mgid(pkey: int, scope: int = DEFAULT_SCOPE) -> str:
    """The IPv4 broadcast MGID of a partition, as saquery prints it (``ff12:401b:8a01::ffff:ffff``)."""
    return f"ff1{scope & 0xF:x}:401b:{(pkey & 0x7FFF) | 0x8000:x}::ffff:ffff"


@dataclass(frozen=True, order=True)
class McGroup:
    """One multicast group record (SA MCMemberRecord of a group, or the SA dump's line)."""

    mgid: str  # canonical IPv6 text, lower case
    mlid: int
    pkey: int  # 16-bit, as recorded (0x8a01)
    mtu: int = 0
    rate: int = 0
    sl: int = 0

    @property
    def is_ipv4_broadcast(self) -> bool:
        return bool(re.fullmatch(r"ff1[0-9a-f]:401b:[0-9a-f]{1,4}::ffff:ffff", self.mgid))


def _canon_gid(text: str) -> str:
    return str(ipaddress.IPv6Address(text.strip()))


_FIELD = re.compile(r"^\s*(\w+)\.{2,}(\S+)\s*$")


def parse_saquery_groups(text: str) -> tuple[McGroup, ...]:
    """``saquery -g`` (infiniband-diags 44) output: one ``MCMemberRecord group dump:`` block
    per group with ``MGID``, ``Mlid``, ``Mtu``, ``pkey``, ``Rate``, ``SL`` lines."""
    out: list[McGroup] = []
    cur: dict[str, str] | None = None

    def flush() -> None:
        if cur and "MGID" in cur:
            out.append(
                McGroup(
                    _canon_gid(cur["MGID"]),
                    int(cur.get("Mlid", "0"), 0),
                    int(cur.get("pkey", "0"), 0),
                    int(cur.get("Mtu", "0"), 0),
                    int(cur.get("Rate", "0"), 0),
                    int(cur.get("SL", "0"), 0),
                )
            )

    for line in text.splitlines():
        if line.strip().startswith("MCMemberRecord group dump"):
            flush()
            cur = {}
            continue
        m = _FIELD.match(line)
        if m and cur is not None:
            cur[m.group(1)] = m.group(2)
    flush()
    return tuple(sorted(out))


_DUMP = re.compile(
    r"^MC Group 0x[0-9a-fA-F]+\s.*?mgid=0x([0-9a-fA-F]{16}):0x([0-9a-fA-F]{16})\s.*?"
    r"mlid=0x([0-9a-fA-F]+)\s+mtu=0x([0-9a-fA-F]+)\s.*?pkey=0x([0-9a-fA-F]+)\s+rate=0x([0-9a-fA-F]+)\s.*?"
    r"sl_flow_hop=0x([0-9a-fA-F]+)"
)


def parse_sa_dump_groups(text: str) -> tuple[McGroup, ...]:
    """The ``MC Group`` lines of OpenSM's ``opensm-sa.dump`` (``sa_db_dump TRUE``)."""
    out = []
    for line in text.splitlines():
        m = _DUMP.match(line.strip())
        if not m:
            continue
        hi, lo, mlid, mtu, pkey, rate, sfh = m.groups()
        raw = bytes.fromhex(hi + lo)
        out.append(
            McGroup(
                str(ipaddress.IPv6Address(raw)),
                int(mlid, 16),
                int(pkey, 16),
                int(mtu, 16),
                int(rate, 16),
                int(sfh, 16) >> 28,
            )
        )
    return tuple(sorted(out))


def parse_mcast_fdb_cap(text: str) -> int:
    """``McastFdbCap`` of ``smpquery switchinfo LID`` output; 0 when absent."""
    m = re.search(r"^McastFdbCap:\.*\s*(\d+)\s*$", text, re.M)
    return int(m.group(1)) if m else 0


def missing_groups(pkeys: Iterable[int], groups: Iterable[McGroup], scope: int = DEFAULT_SCOPE) -> list[str]:
    """Broadcast MGIDs of ``pkeys`` (15-bit) that ``groups`` do not hold."""
    have = {g.mgid for g in groups}
    return [m for k in sorted(pkeys) if (m := broadcast_mgid(k, scope)) not in have]


def stale_groups(pkeys: Iterable[int], groups: Iterable[McGroup]) -> list[str]:
    """IPv4 broadcast groups of tenant partitions (not 0x7fff) the layout no longer has."""
    want = {k & 0x7FFF for k in pkeys}
    return [
        g.mgid for g in groups if g.is_ipv4_broadcast and (g.pkey & 0x7FFF) not in want and (g.pkey & 0x7FFF) != 0x7FFF
    ]


def check_mcast_budget(ipoib_partitions: int, cap: int, default_groups: int = DEFAULT_GROUPS) -> None:
    """CapacityError when ``ipoib_partitions`` broadcast groups (plus the default partition's)
    would not fit the switches' ``MulticastFDBCap`` (``cap``; 0 = unknown, not checked)."""
    need = ipoib_partitions + default_groups
    if cap and need > cap:
        raise CapacityError(
            f"{ipoib_partitions} IPoIB partitions need {need} multicast LIDs (one broadcast group each, "
            f"+{default_groups} for the default partition) but the switches hold MulticastFDBCap {cap}: "
            f"at most {cap - default_groups} IPoIB partitions (or set infiniband.options.ipoib.enabled: false)",
            fabric="infiniband",
            needed=need,
            capacity=cap,
        )
