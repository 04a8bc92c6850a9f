"""OpenSM ``partitions.conf``: render a :class:`PartitionLayout` to text and parse it back.

Pure: no I/O. Written against OpenSM 3.3.23's parser (``osm_prtn_config.c``) and what was
measured on ibsim + OpenSM (shared/notes/ibsim-opensm.md):

- any parse error makes OpenSM *fail open* (every port a full member of 0xffff), so the
  renderer only emits what that parser accepts and refuses everything else at plan time;
- lines are read through a 4,096-byte buffer: the renderer writes one GUID per line and the
  parser rejects longer lines (OpenSM would split them silently);
- a port's PKey table holds ``PartitionCap`` entries (64 in ibsim); beyond it OpenSM logs
  ``ERR 0512`` and silently skips keys, so capacity is checked per port before rendering;
- unknown GUIDs are ignored by OpenSM (no error) - the driver checks presence itself.

Rendered form (deterministic: partitions sorted by PKey, members by GUID)::

    Default=0x7fff, ipoib :
    ALL_CAS=limited,
    ALL_SWITCHES=full,
    SELF=full,
    0x0000000000100001=full ;
    t-a_net=0x0a01, ipoib :
    0x0000000000100003=full,
    0x0000000000100005=full ;
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Final

from gpufabric.domain.errors import CapacityError, ValidationError
from gpufabric.domain.values import DEFAULT_PKEY, Guid, Membership, PKey
from gpufabric.fabrics.infiniband.state import Partition, PartitionLayout, PartitionMember
from gpufabric.fabrics.infiniband.state.ipoib import IpoibOptions, partition_flags

DEFAULT_NAME: Final = "Default"
DEFAULT_CAPACITY: Final = 64  # PartitionCap of ibsim HCAs; ConnectX reports 128
LINE_BUFFER: Final = 4096  # OpenSM reads partitions.conf with fgets(line, 4095)
NAME_MAX: Final = 31  # osm_prtn_t.name is char[32]
_NAME_RE: Final = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,30}$")
NAME_ALLOWED: Final = "1-31 chars of A-Z a-z 0-9 _ . -, starting with a letter; not 'Default'"
HEADER: Final = "# partitions.conf rendered by gpufabric - do not edit by hand; changes are overwritten\n"


def check_partition_name(name: str) -> str:
    """A name OpenSM stores intact and that cannot be mistaken for syntax or a keyword."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ValidationError("partition_name", name, NAME_ALLOWED)
    if name.lower() == DEFAULT_NAME.lower():
        raise ValidationError("partition_name", name, NAME_ALLOWED, "reserved")
    return name


def partition_name(network: str) -> str:
    """A stable OpenSM-safe partition name for a network name: the name itself when it is
    valid, else a cleaned prefix plus 8 hex digits of its SHA-256 (same input, same name)."""
    try:
        return check_partition_name(network)
    except ValidationError:
        pass
    digest = hashlib.sha256(network.encode()).hexdigest()[:8]
    clean = re.sub(r"[^A-Za-z0-9_.-]", "_", network)[: NAME_MAX - 11]
    return f"p_{clean}_{digest}" if clean else f"p_{digest}"


@dataclass(frozen=True)
class PortNeed:
    """How many PKey table entries a port needs under a layout."""

    guid: Guid
    entries: int
    capacity: int


def normalize_layout(layout: PartitionLayout, sm_guids: Iterable[Guid] = ()) -> PartitionLayout:
    """The canonical form of ``layout``: partitions sorted by PKey, members deduplicated
    (full wins) and sorted, SM GUIDs merged into ``default_full``. ``parse(render(x))``
    equals ``normalize_layout(x, sm_guids)``."""
    parts = []
    for p in sorted(layout.partitions, key=lambda p: p.pkey.value):
        vals = [m.guid.value for m in p.members]
        if all(a < b for a, b in pairwise(vals)):  # sorted, no duplicates: canonical already
            parts.append(Partition(p.name, PKey(p.pkey.value), tuple(p.members), p.ipoib, p.qos))
            continue
        best: dict[Guid, Membership] = {}
        for m in p.members:
            if best.get(m.guid) is not Membership.FULL:
                best[m.guid] = m.membership
        members = tuple(PartitionMember(g, best[g]) for g in sorted(best, key=_guid_value))
        parts.append(Partition(p.name, PKey(p.pkey.value), members, p.ipoib, p.qos))
    default_full = tuple(sorted(set(layout.default_full) | set(sm_guids), key=_guid_value))
    return PartitionLayout(tuple(parts), default_full, layout.default_limited_all)


def check_layout(
    layout: PartitionLayout,
    sm_guids: Iterable[Guid] = (),
    capacity: Mapping[Guid, int] | None = None,
    default_capacity: int = DEFAULT_CAPACITY,
) -> PartitionLayout:
    """Validate ``layout`` for OpenSM and return its normalized form.

    Raises ValidationError for bad/duplicate names, reserved or duplicate keys, and
    CapacityError (naming the port, need and capacity) when a port would need more PKey
    table entries than it has (the default partition takes one slot)."""
    norm = normalize_layout(layout, sm_guids)
    names: set[str] = set()
    keys: set[int] = set()
    for p in norm.partitions:
        check_partition_name(p.name)
        if p.name.lower() in names:
            raise ValidationError("partition_name", p.name, "unique per subnet (case-insensitive)", "duplicate")
        names.add(p.name.lower())
        if not PKey.MIN <= p.pkey.value <= PKey.MAX:
            raise ValidationError("pkey", str(p.pkey), PKey.ALLOWED, "reserved key")
        if p.pkey.value in keys:
            raise ValidationError("pkey", str(p.pkey), "unique per subnet", f"duplicate (partition {p.name})")
        keys.add(p.pkey.value)
    for need in port_needs(norm, capacity, default_capacity):
        if need.entries > need.capacity:
            raise CapacityError(
                f"port {need.guid} would need {need.entries} PKey table entries "
                f"(default partition + {need.entries - 1} tenant partitions) but holds {need.capacity}",
                fabric="infiniband",
                device=str(need.guid),
                needed=need.entries,
                capacity=need.capacity,
            )
    return norm


def port_needs(
    layout: PartitionLayout, capacity: Mapping[Guid, int] | None = None, default_capacity: int = DEFAULT_CAPACITY
) -> list[PortNeed]:
    """PKey table entries each listed port needs (tenant partitions + 1 default slot)."""
    count: dict[int, int] = defaultdict(int)  # by GUID value: int keys hash in C
    guid: dict[int, Guid] = {}
    for p in layout.partitions:
        seen = {m.guid.value: m.guid for m in p.members}
        guid.update(seen)
        for v in seen:
            count[v] += 1
    for g in layout.default_full:
        guid.setdefault(g.value, g)
        count.setdefault(g.value, 0)
    full = {g.value for g in layout.default_full}
    cap = capacity or {}
    default_slot = 1 if layout.default_limited_all else 0
    out = []
    for v in sorted(count):
        g = guid[v]
        out.append(PortNeed(g, count[v] + (1 if v in full else default_slot), cap.get(g) or default_capacity))
    return out


def _block(header: str, members: list[str]) -> list[str]:
    if not members:
        return [f"{header} : ;"]
    lines = [f"{header} :"]
    lines += [f"{m}," for m in members[:-1]]
    lines.append(f"{members[-1]} ;")
    return lines


def render_partitions_conf(
    layout: PartitionLayout,
    sm_guids: Iterable[Guid] = (),
    *,
    capacity: Mapping[Guid, int] | None = None,
    default_capacity: int = DEFAULT_CAPACITY,
    default_ipoib: bool = True,
    ipoib: IpoibOptions = IpoibOptions(),
) -> str:
    """Render ``layout`` as OpenSM partitions.conf text. Same input, same bytes.

    Default partition (0x7fff): every CA limited (when ``default_limited_all``), switches
    and the SM's own port (SELF) full, plus ``sm_guids`` and ``layout.default_full`` full.
    One partition per tenant network with its members; a partition marked ``ipoib`` gets the
    subnet's ``ipoib`` options with its own ``qos`` over them (:func:`~.ipoib.partition_flags`:
    ``", ipoib, mtu=4"``; none when either is off). Raises before rendering anything
    OpenSM would misread (see :func:`check_layout`)."""
    norm = check_layout(layout, sm_guids, capacity, default_capacity)
    return render_checked(norm, default_ipoib=default_ipoib, ipoib=ipoib)


def render_checked(
    norm: PartitionLayout, *, default_ipoib: bool = True, ipoib: IpoibOptions = IpoibOptions()
) -> str:
    """:func:`render_partitions_conf` of a layout :func:`check_layout` already returned
    (normalized and checked: the check is not repeated)."""
    lines = [HEADER.rstrip("\n")]
    dmembers = (["ALL_CAS=limited"] if norm.default_limited_all else []) + ["ALL_SWITCHES=full", "SELF=full"]
    dmembers += [f"{g}=full" for g in norm.default_full]
    lines += _block(f"{DEFAULT_NAME}=0x{DEFAULT_PKEY:04x}" + (", ipoib" if default_ipoib else ""), dmembers)
    for p in norm.partitions:
        header = f"{p.name}=0x{p.pkey.value:04x}" + partition_flags(ipoib, p.ipoib, p.qos)
        lines += _block(header, [f"{m.guid}={m.membership.value}" for m in p.members])
    text = "\n".join(lines) + "\n"
    for n, line in enumerate(text.splitlines(), 1):  # cannot happen with the checks above; guard the invariant
        if len(line.encode()) >= LINE_BUFFER - 1:
            raise ValidationError("partitions.conf", f"line {n}", f"lines < {LINE_BUFFER - 1} bytes")
    return text


# --------------------------------------------------------------------------- parsing
def _strtoull(text: str) -> int | None:
    """C ``strtoull(s, &end, 0)`` with the whole string consumed, else None."""
    t = text.strip()
    try:
        if t.lower().startswith("0x"):
            return int(t[2:], 16)
        if len(t) > 1 and t.startswith("0"):
            return int(t[1:], 8)
        return int(t, 10)
    except ValueError:
        return None


def _is_keyword(name: str, keyword: str) -> bool:
    """OpenSM compares ``strncmp(name, KEYWORD, strlen(name))``: any non-empty prefix matches."""
    return bool(name) and keyword.startswith(name)


@dataclass
class _Block:
    name: str
    pkey: int
    ipoib: bool
    line: int
    full: set[Guid]
    limited: set[Guid]
    keywords: list[tuple[str, Membership]]


def _err(line: int, text: str, why: str) -> ValidationError:
    return ValidationError("partitions.conf", f"line {line}: {text.strip()[:80]}", "OpenSM partitions.conf syntax", why)


def _parse_member(tok: str, block: _Block, defmember: Membership, line: int) -> None:
    name, eq, flag = tok.partition("=")
    name, flag = name.strip(), flag.strip()
    if not name or _is_keyword(name, "NONE"):
        return
    membership = defmember
    if eq:  # OpenSM: an empty flag after '=' prefix-matches "full"
        membership = Membership.FULL if ("full".startswith(flag) or "both".startswith(flag)) else Membership.LIMITED
    for kw in ("ALL", "ALL_CAS", "ALL_SWITCHES", "ALL_ROUTERS", "SELF"):
        if _is_keyword(name, kw):
            block.keywords.append((kw, membership))
            return
    guid = _strtoull(name)
    if not guid or guid > 0xFFFF_FFFF_FFFF_FFFF:
        raise _err(line, tok, "bad PortGUID (OpenSM fails open on this)")
    (block.full if membership is Membership.FULL else block.limited).add(Guid(guid))


def _parse_header(text: str, line: int) -> tuple[_Block, Membership]:
    head, *flags = text.split(",")
    name, _, pid = head.partition("=")
    name, pid = name.strip(), pid.strip()
    if not pid and name[:1].isdigit():
        name, pid = "", name
    pkey = _strtoull(pid) if pid else None
    if pkey is None or not pkey & 0x7FFF > 0 or pkey > 0xFFFF:
        raise _err(line, text, "bad or missing partition key (OpenSM fails open or invents one)")
    ipoib = False
    defmember = Membership.LIMITED
    for f in flags:
        fname, _, fval = f.partition("=")
        fname, fval = fname.strip(), fval.strip()
        if not fname:
            raise _err(line, text, "bad partition flags")
        if "ipoib".startswith(fname):
            ipoib = True
        elif "defmember".startswith(fname) and fval and ("full".startswith(fval) or "both".startswith(fval)):
            defmember = Membership.FULL
    return _Block(name, pkey & 0x7FFF, ipoib, line, set(), set(), []), defmember


def _split_statements(text: str) -> list[tuple[int, str, bool]]:
    """(line number, text, terminated-by-';') pieces, comments removed, like OpenSM's loop."""
    out: list[tuple[int, str, bool]] = []
    for n, raw in enumerate(text.splitlines(), 1):
        if len(raw.encode()) + 1 >= LINE_BUFFER - 1:
            raise _err(n, raw, f"line longer than OpenSM's {LINE_BUFFER}-byte buffer: it would be split")
        body = raw.split("#", 1)[0]
        pieces = body.split(";")
        for i, piece in enumerate(pieces):
            terminated = i < len(pieces) - 1
            if piece.strip() or terminated:
                out.append((n, piece, terminated))
    return out


def parse_partitions_conf(text: str) -> PartitionLayout:
    """Parse partitions.conf (what :func:`render_partitions_conf` writes and the common
    hand-written forms: one-line and multi-line definitions, comments, ``defmember``,
    decimal/hex keys, flags) into a normalized layout.

    The default partition (0x7fff) maps to ``default_full`` (explicit GUIDs with full
    membership) and ``default_limited_all`` (``ALL``/``ALL_CAS`` limited). Raises
    ValidationError for anything OpenSM would reject (it fails open) and for keyword
    members (``ALL``...) in a tenant partition, which no layout can express and which
    would put every port in that partition."""
    blocks: list[_Block] = []
    cur: _Block | None = None
    defmember = Membership.LIMITED
    for line, piece, terminated in _split_statements(text):
        body = piece
        if not piece.strip():  # OpenSM 3.3.23 fails on an empty statement, even inside a definition
            raise _err(line, ";", "';' with nothing before it (PARSE ERROR in OpenSM)")
        if cur is None:
            head, sep, body = piece.partition(":")
            if not sep:
                raise _err(line, piece, "no partition definition found")
            cur, defmember = _parse_header(head, line)
        for tok in body.split(","):
            _parse_member(tok, cur, defmember, line)
        if terminated:
            blocks.append(cur)
            cur = None
    if cur is not None:
        blocks.append(cur)  # OpenSM accepts a last definition without ';'
    return _to_layout(blocks)


def _to_layout(blocks: list[_Block]) -> PartitionLayout:
    by_key: dict[int, _Block] = {}
    for b in blocks:
        if b.pkey in by_key:  # OpenSM merges duplicate definitions of a key into the first
            first = by_key[b.pkey]
            first.full |= b.full
            first.limited |= b.limited
            first.keywords += b.keywords
            first.ipoib = first.ipoib or b.ipoib
        else:
            by_key[b.pkey] = b
    default_full: set[Guid] = set()
    limited_all = False
    parts = []
    for key in sorted(by_key):
        b = by_key[key]
        if key == DEFAULT_PKEY:
            default_full = set(b.full)
            limited_all = any(kw in ("ALL", "ALL_CAS") for kw, _ in b.keywords)
            continue
        if b.keywords:
            kw, m = b.keywords[0]
            raise ValidationError(
                "partitions.conf",
                f"line {b.line}: {b.name or hex(key)} includes {kw}={m.value}",
                "explicit port GUIDs in tenant partitions",
                "a keyword member puts every matching port in the partition",
            )
        members = [PartitionMember(g, Membership.FULL) for g in b.full]
        members += [PartitionMember(g, Membership.LIMITED) for g in b.limited - b.full]
        parts.append(Partition(b.name or f"0x{key:04x}", PKey(key), tuple(sorted(members)), b.ipoib))
    return PartitionLayout(tuple(parts), tuple(sorted(default_full)), limited_all)


def layout_guids(layout: PartitionLayout) -> frozenset[Guid]:
    """Every port GUID a layout names."""
    return frozenset(m.guid for p in layout.partitions for m in p.members) | frozenset(layout.default_full)


def expected_entries(layout: PartitionLayout, guid: Guid) -> frozenset[int]:
    """The 16-bit PKey table entries OpenSM gives ``guid`` (a CA port) under ``layout``:
    0xffff / 0x7fff for the default partition, then one entry per tenant partition."""
    out: set[int] = set()
    if guid in layout.default_full:
        out.add(0xFFFF)
    elif layout.default_limited_all:
        out.add(DEFAULT_PKEY)
    for p in layout.partitions:
        ms = {m.membership for m in p.members if m.guid == guid}
        if Membership.FULL in ms:
            out.add(p.pkey.value | 0x8000)
        elif ms:
            out.add(p.pkey.value)
    return frozenset(out)


def entries_by_port(layout: PartitionLayout) -> dict[Guid, frozenset[int]]:
    """:func:`expected_entries` of every port the layout names, in one pass."""
    out: dict[int, set[int]] = defaultdict(set)  # by GUID value: int keys hash in C
    guid: dict[int, Guid] = {}
    full: dict[int, set[int]] = defaultdict(set)
    is_full = Membership.FULL
    for p in layout.partitions:
        full[p.pkey.value].update(m.guid.value for m in p.members if m.membership is is_full)
    for p in layout.partitions:
        k = p.pkey.value
        kf, fk = k | 0x8000, full[k]
        for m in p.members:
            v = m.guid.value
            guid[v] = m.guid
            out[v].add(kf if v in fk else k)
    for g in layout.default_full:
        guid[g.value] = g
        out[g.value].add(0xFFFF)
    res: dict[Guid, frozenset[int]] = {}
    limited = layout.default_limited_all
    default_full = {g.value for g in layout.default_full}
    shared: dict[frozenset[int], frozenset[int]] = {}  # one object per distinct table (ports of a tenant share it)
    for v, keys in out.items():
        if limited and v not in default_full:
            keys.add(DEFAULT_PKEY)
        f = frozenset(keys)
        res[guid[v]] = shared.setdefault(f, f)
    return res


def changed_ports(old: PartitionLayout | None, new: PartitionLayout) -> frozenset[Guid]:
    """Ports whose expected PKey table differs between ``old`` and ``new`` (all of
    ``new``'s ports when ``old`` is unknown, or when the default policy changed)."""
    if old is None or old.default_limited_all != new.default_limited_all:
        return layout_guids(new) | (layout_guids(old) if old is not None else frozenset())
    return changed_entries(entries_by_port(old), entries_by_port(new))


def changed_entries(a: Mapping[Guid, frozenset[int]], b: Mapping[Guid, frozenset[int]]) -> frozenset[Guid]:
    """Ports whose :func:`entries_by_port` differ between two layouts of the same default policy."""
    return frozenset(g for g in a.keys() | b.keys() if a.get(g) != b.get(g))


def _guid_value(g: Guid) -> int:
    """Sort key of a GUID: its integer (the order of ``Guid``'s own comparison, without its
    per-comparison tuple)."""
    return g.value
