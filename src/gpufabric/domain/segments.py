"""config.yaml's ``segments:``: where networks' segments come from, one section per fabric kind.

The core reads one key itself, ``user_vlan_range`` (segmentation ids left to users and Neutron,
never handed out), and hands every registered kind that takes one
(:meth:`~gpufabric.domain.fabric.FabricKind.segment_config`) its own section
``segments.<kind>``: the kind parses it, validates it on its own (one-line ConfigErrors naming
its keys and their allowed ranges, an unknown key refused), holds its defaults and reads the
parsed section back in ``allocate``/``adopt``/``check_instances`` (:meth:`SegmentConfig.of`)
and through the deployment settings it sets (:meth:`SegmentSection.settings`, e.g. a VLAN that
reaches ``Tenancy.settings``). What crosses kinds stays here and generic: every id range a
section claims (:class:`Claim`) must be disjoint from ``user_vlan_range`` and from every other
claim, and an error names the later key and the range it collides with.

``IdRange`` (an inclusive range), :func:`check_vlan_ids` (a VLAN range's bounds),
:func:`known_keys` (a typo refused) and :func:`allocate` (lowest free id) are the pieces the
kinds' parsers and allocators share.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypeVar

from gpufabric.domain.errors import ConfigError, ExhaustedError
from gpufabric.domain.values import VlanId

SECTION: Final = "segments"  # config.yaml's key of this section
USER_KEY: Final = "user_vlan_range"
DEFAULT_USER_VLANS: Final = "2-1999"  # ``user_vlan_range`` when config.yaml has none


@dataclass(frozen=True, order=True)
class IdRange:
    """An inclusive integer range."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ConfigError("range", f"{self.start}-{self.end}", "start <= end")

    def __contains__(self, v: object) -> bool:
        return isinstance(v, int) and self.start <= v <= self.end

    def __len__(self) -> int:
        return self.end - self.start + 1

    def overlaps(self, other: IdRange) -> bool:
        return self.start <= other.end and other.start <= self.end

    def __str__(self) -> str:
        return f"{self.start}-{self.end}"

    @classmethod
    def parse(cls, field: str, raw: Any) -> IdRange:
        try:
            if isinstance(raw, str):
                a, b = raw.split("-", 1)
                return cls(int(a, 0), int(b, 0))
            if isinstance(raw, Mapping):
                return cls(int(raw["start"]), int(raw["end"]))
            a, b = raw
            return cls(int(a), int(b))
        except ConfigError as e:
            raise ConfigError(field, raw, e.allowed) from None
        except (ValueError, TypeError, KeyError):
            raise ConfigError(field, raw, "'START-END' or [start, end]") from None


def check_vlan_ids(field: str, r: IdRange) -> None:
    """A range of ids a switch sees as VLANs: inside the VLAN id space, never VLAN 1."""
    if r.start < VlanId.MIN or r.end > VlanId.MAX:
        raise ConfigError(field, str(r), f"inside {VlanId.ALLOWED}")
    if 1 in r:  # VLAN 1 is every switch's default VLAN: the audit flags any port carrying it
        raise ConfigError(field, str(r), "inside 2-4094 (never VLAN 1, the default VLAN)")


def known_keys(where: str, raw: Any, keys: Iterable[str]) -> None:
    """A ConfigError naming ``where.<key>`` for a key of ``raw`` not in ``keys`` (a typo would
    silently leave a default in force; a non-mapping is its parser's to refuse)."""
    allowed = tuple(keys)
    for k in raw if isinstance(raw, Mapping) else ():
        if k not in allowed:
            raise ConfigError(f"{where}.{k}", raw[k], f"known keys only: {', '.join(sorted(allowed))}")


@dataclass(frozen=True)
class Claim:
    """Segmentation ids one key of a section takes for itself: disjoint from ``user_vlan_range``
    and from every other claim (checked by :class:`SegmentConfig`). ``name`` set: the claim is
    one id (``ids.start``), so named in another's error ("not containing the quarantine VLAN 4000")."""

    field: str  # the key, as errors name it (e.g. ``<kind>.vlan_range``)
    ids: IdRange
    name: str = ""

    def text(self) -> str:
        return str(self.ids.start) if self.name else str(self.ids)

    def check_clear_of(self, earlier: Sequence[Claim]) -> None:
        """Refuse this claim colliding with one of ``earlier`` (the error names this key)."""
        if self.name:
            if any(self.ids.start in e.ids for e in earlier):
                raise ConfigError(self.field, self.ids.start, f"outside {' and '.join(e.text() for e in earlier)}")
            return
        for e in earlier:
            if self.ids.overlaps(e.ids):
                said = f"not containing {e.name} {e.text()}" if e.name else f"disjoint from {e.field} {e.ids}"
                raise ConfigError(self.field, str(self.ids), said)


class SegmentSection:
    """A kind's parsed section of ``segments:`` (what ``FabricKind.segment_config`` returns)."""

    def claims(self) -> Sequence[Claim]:
        """The id ranges this section takes (default: none)."""
        return ()

    def settings(self) -> Mapping[str, Any]:
        """Deployment-wide facts this section sets (``Tenancy.settings``, what a kind's ``build``
        is handed; one source each). Default: none."""
        return {}

    def describe(self) -> str:
        """This section's values in a phrase (the configuration reference's defaults line)."""
        return ""


S = TypeVar("S", bound=SegmentSection)


class SectionKind(Protocol):
    """What :class:`SegmentConfig` reads of a fabric kind (its segments facet,
    :class:`~gpufabric.domain.kind.segments.KindSegments`)."""

    @property
    def name(self) -> str: ...

    @property
    def takes_segments(self) -> bool: ...

    def segment_config(self, raw: Any, where: str) -> SegmentSection: ...


def takes_section(kind: SectionKind) -> bool:
    """True when ``kind`` takes a section of ``segments:`` (overrides ``FabricKind.segment_config``)."""
    return kind.takes_segments


@dataclass(frozen=True)
class SegmentConfig:
    """``user_vlan_range`` and every kind's parsed section (kind name -> section, in the
    kinds' order), validated against each other."""

    user_vlans: IdRange
    sections: Mapping[str, SegmentSection] = field(default_factory=dict, hash=False)

    @classmethod
    def default(cls, kinds: Iterable[SectionKind]) -> SegmentConfig:
        return cls.from_dict({}, kinds)

    @classmethod
    def from_dict(cls, raw: Any, kinds: Iterable[SectionKind]) -> SegmentConfig:
        """The ``segments:`` section of config.yaml, split by kind name: each of ``kinds`` (the
        registered ones, in order) that takes a section parses its own; a key no kind takes is
        refused naming it. Then every claim is checked against the earlier ones."""
        raw = {} if raw is None else raw
        if not isinstance(raw, Mapping):
            raise ConfigError(SECTION, raw, f"a mapping with {USER_KEY} and one section per fabric kind")
        takers = list({k.name: k for k in kinds if takes_section(k)}.values())
        known_keys(SECTION, raw, (USER_KEY, *(k.name for k in takers)))
        user = IdRange.parse(USER_KEY, raw.get(USER_KEY, DEFAULT_USER_VLANS))
        check_vlan_ids(USER_KEY, user)
        cfg = cls(user, {k.name: k.segment_config(raw.get(k.name), k.name) for k in takers})
        claims = cfg.claims()
        for i, c in enumerate(claims):
            c.check_clear_of(claims[:i])
        return cfg

    def claims(self, besides: SegmentSection | None = None) -> list[Claim]:
        """``user_vlan_range`` and every section's claims, in order (less those of ``besides``)."""
        out = [Claim(USER_KEY, self.user_vlans)]
        for s in self.sections.values():
            out += () if s is besides else s.claims()
        return out

    def check_clear(self, field: str, ids: IdRange, besides: SegmentSection | None = None) -> None:
        """A range configured elsewhere (e.g. a fabric instance's own pool, ``field``) must stay
        clear of ``user_vlan_range`` and of every section's claims but those of ``besides``."""
        Claim(field, ids).check_clear_of(self.claims(besides))

    def of(self, kind: type[S]) -> S:
        """The parsed section of type ``kind`` (how a kind reads its own)."""
        for s in self.sections.values():
            if isinstance(s, kind):
                return s
        raise ConfigError(SECTION, kind.__name__, "a section of a kind registered when config.yaml was read")

    def settings(self) -> dict[str, Any]:
        """Every section's deployment-wide settings (:meth:`SegmentSection.settings`)."""
        out: dict[str, Any] = {}
        for s in self.sections.values():
            out.update(s.settings())
        return out


def allocate(pool: Iterable[int], used: Iterable[int], field: str) -> int:
    """Return the lowest id of ``pool`` not in ``used`` (pure)."""
    taken = set(used)
    for v in pool:
        if v not in taken:
            return v
    raise ExhaustedError(f"no free value left in {field}", field=field)
