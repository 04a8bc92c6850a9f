"""UFM PKey plan: the REST calls that turn UFM's current partitions into a desired layout,
and the parsers of UFM's PKey responses. Pure: no I/O (the driver in ``ufm.py`` sends).

Written against NVIDIA UFM Enterprise's documented "PKey GUIDs REST API"
(``/ufmRest/resources/pkeys``). Only documented calls are planned:

- ``DELETE /resources/pkeys/<pkey>/guids/<g1>,<g2>`` — remove GUIDs from a PKey;
- ``DELETE /resources/pkeys/<pkey>`` — remove a PKey;
- ``POST /resources/pkeys`` ``{pkey, guids, membership, index0, ip_over_ib}`` — add GUIDs
  (one call per membership, since ``membership`` applies to every GUID of the call);
- ``POST /resources/pkeys/add`` ``{pkey, index0, ip_over_ib, service_level, rate_limit}`` —
  create a PKey without GUIDs with its QoS (the docs' example: ``"service_level": 0,
  "rate_limit": 2.5``), planned first for a partition that has its own ``sl`` or ``rate`` (a
  network's options; the rate as the IBA rate code's Gb/s, :data:`RATE_GBPS`). Its MTU
  (``mtu_limit``: the docs give no encoding) and IPoIB ``scope`` (no UFM field) are refused by
  the driver. A PKey whose reported ``service_level``/``rate_limit`` differ from the asked ones
  is deleted and re-created; a UFM that reports neither cannot be checked for them.

Plans are ordered *remove before add* (a GUID moving between tenants leaves the old PKey
before it joins the new one). A member whose membership changes is removed and re-added;
a PKey whose ``ip_over_ib`` changes is deleted and re-created, because the documented
calls do not say that an add updates either on an existing entry. A desired partition
with no members is planned as absent (the add call requires GUIDs). PKeys outside the
``managed`` range (and UFM's management key 0x7fff) are never touched.

Wire formats: PKeys as ``0x`` + hex without padding (as UFM lists them, e.g. ``0xa01``);
GUIDs as 16 lower-case hex digits without ``0x`` (the docs allow 16-20 hex characters).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gpufabric.domain.errors import FabricError, ValidationError
from gpufabric.domain.values import Guid, Membership, PKey
from gpufabric.fabrics.infiniband.state import Partition, PartitionLayout, PartitionMember

FABRIC: Final = "infiniband"
MANAGEMENT_PKEY: Final = 0x7FFF
REMOVE_CHUNK: Final = 64  # GUIDs per DELETE: keeps the URL near 1 KiB


def wire_pkey(value: int) -> str:
    return f"0x{value:x}"


def wire_guid(guid: Guid) -> str:
    return f"{guid.value:016x}"


RATE_GBPS: Final = {2: 2.5, 3: 10.0, 4: 30.0, 5: 5.0, 6: 20.0, 7: 40.0, 8: 60.0, 9: 80.0, 10: 120.0, 11: 14.0,
                    12: 56.0, 13: 112.0, 14: 168.0, 15: 25.0, 16: 100.0, 17: 200.0, 18: 300.0, 19: 28.0, 20: 50.0,
                    21: 400.0, 22: 600.0}  # fmt: skip
"""IBA rate code (partitions.conf ``rate=``, PathRecord Rate) -> Gb/s (UFM's ``rate_limit``)."""
UFM_QOS: Final = {"sl": "service_level", "rate": "rate_limit"}  # a partition's own qos key -> UFM's field


class UfmOp(enum.StrEnum):
    DELETE_PKEY = "delete_pkey"
    REMOVE_GUIDS = "remove_guids"
    CREATE_PKEY = "create_pkey"
    ADD_GUIDS = "add_guids"


@dataclass(frozen=True)
class UfmCall:
    """One REST call of a UFM plan."""

    op: UfmOp
    pkey: int  # 15-bit partition number
    guids: tuple[Guid, ...] = ()
    membership: Membership = Membership.FULL
    ip_over_ib: bool = False
    index0: bool = False
    qos: tuple[tuple[str, int], ...] = ()  # CREATE_PKEY: the partition's own sl/rate

    def request(self) -> tuple[str, str, dict[str, Any] | None]:
        """``(method, path below the API prefix, JSON body)``."""
        pk = wire_pkey(self.pkey)
        if self.op is UfmOp.DELETE_PKEY:
            return "DELETE", f"/resources/pkeys/{pk}", None
        if self.op is UfmOp.CREATE_PKEY:
            qos = {UFM_QOS[k]: RATE_GBPS[v] if k == "rate" else v for k, v in self.qos if k in UFM_QOS}
            return "POST", "/resources/pkeys/add", {"pkey": pk, "index0": self.index0, "ip_over_ib": self.ip_over_ib, **qos}
        if self.op is UfmOp.REMOVE_GUIDS:
            return "DELETE", f"/resources/pkeys/{pk}/guids/{','.join(wire_guid(g) for g in self.guids)}", None
        body = {
            "pkey": pk,
            "guids": [wire_guid(g) for g in self.guids],
            "membership": self.membership.value,
            "index0": self.index0,
            "ip_over_ib": self.ip_over_ib,
        }
        return "POST", "/resources/pkeys", body

    def __str__(self) -> str:
        method, path, _ = self.request()
        extra = f" {self.membership.value} x{len(self.guids)}" if self.op is UfmOp.ADD_GUIDS else ""
        return f"{method} {path}{extra}"


@dataclass(frozen=True)
class PKeyRange:
    """The PKeys (15-bit) gpufabric owns on this UFM; others are left alone."""

    start: int = PKey.MIN
    end: int = PKey.MAX

    def __post_init__(self) -> None:
        if not PKey.MIN <= self.start <= self.end <= PKey.MAX:
            raise ValidationError("managed_pkeys", f"{self.start:#x}-{self.end:#x}", PKey.ALLOWED)

    def __contains__(self, value: object) -> bool:
        return isinstance(value, int) and self.start <= value <= self.end

    @classmethod
    def parse(cls, raw: str | Sequence[int | str] | None) -> PKeyRange:
        """``"0x0a00-0x0aff"``, ``[start, end]`` or None (every tenant PKey)."""
        if raw is None:
            return cls()
        parts: Sequence[int | str] = raw.split("-") if isinstance(raw, str) else raw
        if len(parts) != 2:
            raise ValidationError("managed_pkeys", raw, "'0xSTART-0xEND' or [start, end]")
        lo, hi = (PKey.parse(p, field="managed_pkeys").value for p in parts)
        return cls(lo, hi)


def _by_guid(p: Partition) -> dict[Guid, Membership]:
    return {m.guid: m.membership for m in p.members}


def _adds(p: Partition, guids: Iterable[Guid], index0: bool) -> list[UfmCall]:
    want = _by_guid(p)
    chosen = sorted(set(guids))
    out = []
    for membership in (Membership.FULL, Membership.LIMITED):
        group = tuple(g for g in chosen if want[g] is membership)
        if group:
            out.append(UfmCall(UfmOp.ADD_GUIDS, p.pkey.value, group, membership, p.ipoib, index0))
    return out


def _created(p: Partition, index0: bool) -> list[UfmCall]:
    """The PKey created with its QoS first, when the partition has its own sl/rate."""
    qos = tuple((k, v) for k, v in p.qos if k in UFM_QOS)
    return [UfmCall(UfmOp.CREATE_PKEY, p.pkey.value, (), Membership.FULL, p.ipoib, index0, qos)] if qos else []


def _qos_differs(want: Partition, have: Partition) -> bool:
    """A sl/rate ``want`` asks that UFM reports otherwise (not reported: not checked)."""
    seen = dict(have.qos)
    return any(k in seen and seen[k] != v for k, v in want.qos if k in UFM_QOS)


def _removes(pkey: int, guids: Iterable[Guid]) -> list[UfmCall]:
    chosen = sorted(set(guids))
    return [
        UfmCall(UfmOp.REMOVE_GUIDS, pkey, tuple(chosen[i : i + REMOVE_CHUNK]))
        for i in range(0, len(chosen), REMOVE_CHUNK)
    ]


def desired_partitions(desired: PartitionLayout, managed: PKeyRange) -> dict[int, Partition]:
    """The non-empty desired partitions by PKey; refuses duplicates and unmanaged PKeys."""
    want: dict[int, Partition] = {}
    for p in desired.partitions:
        if p.pkey.value not in managed:
            raise ValidationError(
                "pkey", str(p.pkey), f"a PKey managed on this UFM ({managed.start:#x}-{managed.end:#x})"
            )
        if p.pkey.value in want:
            raise ValidationError("pkey", str(p.pkey), "each PKey once per layout", "duplicate")
        seen: set[Guid] = set()
        for m in p.members:
            if m.guid in seen:
                raise ValidationError("guid", str(m.guid), f"each GUID once in partition {p.pkey}", "duplicate")
            seen.add(m.guid)
        if p.members:
            want[p.pkey.value] = p
    return want


def plan_ufm(
    desired: PartitionLayout,
    current: Sequence[Partition],
    managed: PKeyRange | None = None,
    *,
    index0: bool = False,
) -> tuple[UfmCall, ...]:
    """The calls that make UFM's managed PKeys equal to ``desired``: every removal (PKey
    deletions and GUID removals, by PKey) before any addition. Empty when already equal."""
    managed = managed or PKeyRange()
    want = desired_partitions(desired, managed)
    have = {p.pkey.value: p for p in current if p.pkey.value in managed}
    removes: list[UfmCall] = []
    adds: list[UfmCall] = []
    for pk in sorted(set(want) | set(have)):
        w, h = want.get(pk), have.get(pk)
        if w is None:
            assert h is not None
            removes.append(UfmCall(UfmOp.DELETE_PKEY, pk))
        elif h is None:
            adds += _created(w, index0) + _adds(w, _by_guid(w), index0)
        elif w.ipoib != h.ipoib or _qos_differs(w, h):
            removes.append(UfmCall(UfmOp.DELETE_PKEY, pk))
            adds += _created(w, index0) + _adds(w, _by_guid(w), index0)
        else:
            wm, hm = _by_guid(w), _by_guid(h)
            removes += _removes(pk, (g for g, m in hm.items() if wm.get(g) is not m))
            adds += _adds(w, (g for g, m in wm.items() if hm.get(g) is not m), index0)
    return tuple(removes + adds)


# --------------------------------------------------------------------------- responses
def _bad(what: str, raw: object) -> FabricError:
    return FabricError(f"unexpected UFM response for {what}: {str(raw)[:200]}", fabric=FABRIC, device="ufm")


def _pkey_number(text: object) -> int:
    try:
        return int(str(text).strip().lower().removeprefix("0x"), 16) & 0x7FFF
    except ValueError:
        raise _bad("PKey list", text) from None


def parse_ufm_pkey_list(raw: Any) -> list[int]:
    """``GET /resources/pkeys``: UFM answers a mapping keyed by PKey (``{"0xa01": {...}}``);
    a list of PKey strings or of objects with ``pkey`` is accepted too. Sorted 15-bit numbers."""
    if isinstance(raw, Mapping):
        keys: list[object] = list(raw)
    elif isinstance(raw, list):
        keys = [k.get("pkey") if isinstance(k, Mapping) else k for k in raw]
    else:
        raise _bad("PKey list", raw)
    return sorted({_pkey_number(k) for k in keys})


def parse_ufm_members(pkey: int, raw: Any) -> tuple[PartitionMember, ...] | None:
    """The members in ``GET /resources/pkeys/<pkey>?guids_data=true``
    (``"guids": [{"guid", "membership", "index0"}]``), sorted; ``{}`` means no such PKey (None)."""
    if raw is None or raw == {}:
        return None
    if not isinstance(raw, Mapping):
        raise _bad(f"PKey {wire_pkey(pkey)}", raw)
    members = []
    for entry in raw.get("guids") or []:
        if not isinstance(entry, Mapping) or "guid" not in entry:
            raise _bad(f"PKey {wire_pkey(pkey)} member", entry)
        try:
            guid = Guid.parse(str(entry["guid"]))
            membership = Membership(str(entry.get("membership", "full")).lower())
        except (ValidationError, ValueError):
            raise _bad(f"PKey {wire_pkey(pkey)} member", entry) from None
        members.append(PartitionMember(guid, membership))
    return tuple(sorted(members))


def parse_ufm_pkey(pkey: int, raw: Any) -> Partition | None:
    """A tenant PKey (0x0001-0x7ffe) as UFM reports it with ``guids_data=true``:
    ``{"partition", "ip_over_ib", "guids": [...]}``; None when UFM has no such PKey."""
    members = parse_ufm_members(pkey, raw)
    if members is None:
        return None
    name = str(raw.get("partition") or f"pkey_{wire_pkey(pkey)}")
    return Partition(name=name, pkey=PKey(pkey), members=members, ipoib=bool(raw.get("ip_over_ib")), qos=_qos_of(raw))


def _qos_of(raw: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """The ``service_level``/``rate_limit`` UFM reports of a PKey, as a partition's sl/rate
    (a rate of no IBA code is left out)."""
    codes = {gbps: code for code, gbps in RATE_GBPS.items()}
    out = []
    if isinstance(sl := raw.get("service_level"), int) and not isinstance(sl, bool):
        out.append(("sl", sl))
    if isinstance(rate := raw.get("rate_limit"), int | float) and not isinstance(rate, bool) and float(rate) in codes:
        out.append(("rate", codes[float(rate)]))
    return tuple(sorted(out))
