"""The InfiniBand fabric on the seam: PKey allocation through the segmentation-id mapping,
the desired partition layout, the diff of real PKey tables, composing the backend
(backend.py) around one subnet-manager driver (OpenSM or UFM, drivers/) whose
apply returns the SMP read-back of the ports it changed.

``fabrics.yaml``::

    infiniband: {driver: opensm, options: {..., ipoib: {enabled: true, mtu: 4}},
                 segments: {seg_range: "3000-3499", mapping: {mode: offset, base: "0x0a00"}}}
    sm_port_guids: ["0x..."]       # the SM node's ports: full members of the default partition
    trusted_sm_guids: ["0x..."]    # the only SMs allowed (default: sm_port_guids)

``segments`` (optional) is the subnet's own segmentation-id pool and PKey mapping
(:mod:`~gpufabric.fabrics.infiniband.segments.pools`); without it the instance allocates from config.yaml's ``segments.infiniband``.

Trusted SM GUIDs have one source, the top level: they are handed to the driver, and a driver
option that disagrees is refused. An ``infiniband`` section with no trusted SM GUID at all
is a ConfigError naming ``trusted_sm_guids``: without one every SM - the trusted one too -
would be "rogue", and repair would cut the trusted SM off.

Tenant partitions carry ``ipoib`` (their broadcast group); the driver's ``ipoib`` option
(:class:`~gpufabric.fabrics.infiniband.state.ipoib.IpoibOptions`) sets mtu/rate/sl/scope for all of them or turns it off.
Each IPoIB partition takes one multicast LID: allocation refuses a network beyond
:data:`~gpufabric.fabrics.infiniband.state.ipoib.IPOIB_PARTITION_LIMIT` (MulticastFDBCap 1,024 of ibsim's switches less the
default partition's group), and the OpenSM driver checks the switches' real MulticastFDBCap
before it writes a layout.

Rogue SMs are contained per finding: a finding whose LID cannot be placed on a discovered CA
port (or that is a trusted SM's port) is reported as an alert, the others are still cut.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from gpufabric.domain.errors import ConfigError, ConflictError, ExhaustedError, ValidationError
from gpufabric.domain.fabric import (
    DriverLookup,
    FabricKind,
    InvariantSpec,
    PortSeen,
    Tenancy,
    build_driver,
)
from gpufabric.domain.findings import Violation
from gpufabric.domain.models import Network, Node, PortKey, Segment
from gpufabric.domain.segments import allocate
from gpufabric.domain.topology import SwitchPath, path_json
from gpufabric.domain.values import Guid
from gpufabric.domain.views import CliGroup
from gpufabric.fabrics.infiniband.audit import invariants as ib_audit
from gpufabric.fabrics.infiniband.audit.index import IbAudit
from gpufabric.fabrics.infiniband.audit.sm_files import SPEC as SM_FILES_SPEC
from gpufabric.fabrics.infiniband.audit.sm_files import sm_file_violations
from gpufabric.fabrics.infiniband.backend import InfinibandBackend
from gpufabric.fabrics.infiniband.drivers.base import SubnetManagerDriver
from gpufabric.fabrics.infiniband.entries import (
    ENTRY_SCHEMA,
    KIND,
    PORT_GUID,
    IbPort,
    all_ib_ports,
    check_rails,
    dump_ib,
    ib_keys,
    ib_ports,
    parse_ib,
)
from gpufabric.fabrics.infiniband.plan import (
    IbDesired,
    IbPlan,
    as_observed_ib,
    desired_ib,
    diff_ib,
    ib_tenants_seen,
    merge_ib,
)
from gpufabric.fabrics.infiniband.segments import IbSegments, PKeyMapping, global_section, pkey_segment, segment_pkey
from gpufabric.fabrics.infiniband.segments.pools import check_pools, own_pool, pool_of
from gpufabric.fabrics.infiniband.site_check import infiniband_site_checks
from gpufabric.fabrics.infiniband.state import IbFabricState
from gpufabric.fabrics.infiniband.state.ipoib import IPOIB_PARTITION_LIMIT, IpoibOptions, network_options

if TYPE_CHECKING:
    from gpufabric.domain.hooks import ImportFormat


SM_SETTINGS = ("sm_port_guids", "trusted_sm_guids")
"""The top-level keys of fabrics.yaml the kind reads (:meth:`InfinibandKind.deployment_settings`)."""


def guids_setting(settings: Mapping[str, Any], key: str) -> tuple[Guid, ...]:
    return tuple(g if isinstance(g, Guid) else Guid.parse(g, field=key) for g in settings.get(key, ()) or ())


def sm_files(section: Any) -> list[tuple[str, str, str]]:
    """(field, value, identity) of every partitions file an instance's section writes: its local
    ``options.partitions_conf`` and each SM host's file (host, port, path)."""
    opts = section.get("options") if isinstance(section, Mapping) else None
    if not isinstance(opts, Mapping):
        return []
    out: list[tuple[str, str, str]] = []
    if isinstance(opts.get("partitions_conf"), str) and opts["partitions_conf"]:
        conf = opts["partitions_conf"]
        out.append(("options.partitions_conf", conf, f"local:{os.path.normpath(os.path.abspath(conf))}"))
    hosts = opts.get("sm_hosts")
    for i, h in enumerate(hosts if isinstance(hosts, list) else []):
        if isinstance(h, Mapping) and isinstance(h.get("partitions_conf"), str):
            path = os.path.normpath(h["partitions_conf"])
            out.append((f"options.sm_hosts[{i}].partitions_conf", h["partitions_conf"],
                        f"ssh:{h.get('host')}:{h.get('port', 22)}:{path}"))  # fmt: skip
    return out


class InfinibandKind(FabricKind[IbDesired, IbFabricState]):
    name = KIND
    order = 20  # after Ethernet, before the kinds of the default order
    ports_section = True
    inventory_key: ClassVar[str | None] = "ib"
    entry_schema: ClassVar[Mapping[str, Any] | None] = ENTRY_SCHEMA
    top_level: ClassVar[frozenset[str]] = frozenset(SM_SETTINGS)

    def deployment_settings(self, fabrics_yaml: Mapping[str, Any]) -> Mapping[str, Any]:
        """``sm_port_guids`` (full members of the default partition) and ``trusted_sm_guids``
        (the only SMs allowed on a subnet), each the other's default: the deployment's SM ports."""
        guids, trusted = (tuple(Guid.parse(g, field=key) for g in fabrics_yaml.get(key, []) or []) for key in SM_SETTINGS)
        return {"sm_port_guids": guids or trusted, "trusted_sm_guids": trusted or guids}

    # ---- the kind's column of the inventory (:mod:`.entries`)
    def parse_ports(self, node: str, raw: Any, where: str) -> tuple[IbPort, ...]:
        return parse_ib(node, raw, where, self.instance)

    def dump_ports(self, ports: tuple[Any, ...]) -> list[Any]:
        return dump_ib(ports)

    def port_keys(self, ports: tuple[Any, ...]) -> Iterable[PortKey]:
        return ib_keys(ports)

    def ports(self, node: Node) -> tuple[IbPort, ...]:
        """``node``'s HCA ports on this subnet: its entries here and the ``ib:`` entries naming it."""
        return ib_ports(node, self.instance)

    def listed_ports(self, node: Node, instances: Collection[str] = ()) -> Sequence[Mapping[str, Any]]:
        """Every HCA port of ``node``, on every instance (its instance not named), with its
        ``path`` up the subnet (leaf, spines, ...: :mod:`~gpufabric.fabrics.infiniband.inventory.uplinks`)."""
        return [{**_port_json(p), "path": path_json(_path(p))} for p in all_ib_ports(node)]

    def check_slot(self, host: Node, modules: frozenset[int]) -> None:
        """A slot's GPUs each need a rail HCA (an ``ib:`` port with that ``gpu``) when ``host`` has
        HCA ports (:func:`~gpufabric.fabrics.infiniband.entries.check_rails`)."""
        check_rails(host, modules)

    def lookup_key(self, query: Mapping[str, str]) -> PortKey | None:
        """``guid``: the HCA port of that port GUID."""
        guid = query.get("guid")
        return PortKey(PORT_GUID, str(Guid.parse(guid))) if guid else None

    def import_formats(self) -> Sequence[ImportFormat]:
        """``inventory import --format ibnetdiscover`` (:mod:`.inventory.importer`) and ``--format
        nvidia-smi-topo`` (the GPU <-> HCA affinity, :mod:`.inventory.affinity`), imported only then."""
        from gpufabric.fabrics.infiniband.inventory.affinity import import_format as affinity_format
        from gpufabric.fabrics.infiniband.inventory.importer import import_format

        return (import_format(), affinity_format())

    def check_instances(self, sections: Mapping[str, Any], config: Any = None) -> None:
        """Each instance is one subnet with SMs of its own: two instances writing one SM's
        partitions file (the same local ``partitions_conf``, or the same file on one SM host)
        would map their PKeys twice on one SM, each write reverting the other's; and its own
        segment pool, if any, apart from the others' (:func:`~gpufabric.fabrics.infiniband.segments.pools.check_pools`). ConfigError
        naming the second instance's field."""
        check_pools(sections, config)
        seen: dict[str, tuple[str, str]] = {}
        for name, section in sections.items():
            for where, value, key in sm_files(section):
                if key in seen and seen[key][0] != name:
                    other, other_where = seen[key]
                    raise ConfigError(
                        f"fabrics.{name}.{where}", value,
                        f"a subnet manager of its own per InfiniBand instance (fabrics.{other}.{other_where} writes "
                        "it: the PKeys of both instances would be mapped twice on one SM)",
                    )  # fmt: skip
                seen.setdefault(key, (name, where))

    def build(self, section: Any, drivers: DriverLookup, settings: Mapping[str, Any]) -> InfinibandBackend:
        trusted = [str(g) for g in guids_setting(settings, "trusted_sm_guids")]
        options = section.get("options") if isinstance(section, Mapping) else None
        opts = options if isinstance(options, Mapping) else {}
        if not trusted and not opts.get("trusted_sm_guids"):
            raise ConfigError(
                "trusted_sm_guids",
                "missing",
                "the port GUIDs of the trusted SMs (fabrics.yaml top level) with an infiniband section",
                "without it every SM, the trusted one too, is a rogue and repair would cut it off",
            )
        if "ipoib" in opts:
            IpoibOptions.parse(opts["ipoib"])  # one-line ConfigError naming the field, before any driver starts
        own = opts.get("trusted_sm_guids")
        if trusted and own:  # several subnets: each instance names its own trusted SMs, out of the top level's
            where = f"fabrics.{self.instance}.options.trusted_sm_guids"
            mine = [str(Guid.parse(g, field=where)) for g in (own if isinstance(own, list) else [own])]
            if extra := sorted(set(mine) - set(trusted)):
                raise ConfigError(where, extra[0], f"GUIDs of the top-level trusted_sm_guids ({', '.join(trusted)})")
            trusted = mine
            section = {**section, "options": {**opts, "trusted_sm_guids": mine}}
        drv = build_driver(
            drivers, "infiniband", section, {}, {"trusted_sm_guids": trusted} if trusted else {},
            expect=(SubnetManagerDriver, "a subnet manager driver"),
        )  # fmt: skip
        assert isinstance(drv, SubnetManagerDriver)
        pool = own_pool(self.instance, section)
        return InfinibandBackend(drv, tuple(Guid.parse(g) for g in trusted), self.instance, pool, infiniband_site_checks)

    def segment_config(self, raw: Any, where: str) -> IbSegments:
        """``segments.infiniband``: the global segmentation-id pool and its PKey mapping (:mod:`.segments`)."""
        return IbSegments.from_dict(raw, where)

    def pool(self, config: Any) -> tuple[PKeyMapping, str]:
        """This instance's pool (its own ``segments:``, else config.yaml's) and the
        field naming its range (:mod:`~gpufabric.fabrics.infiniband.segments.pools`); its own is parsed once per bound section (a
        copy made by :meth:`bind` with another section parses that one)."""
        cached = self.__dict__.get("_pool")
        if cached is None or cached[0] is not self.section:
            cached = self.__dict__["_pool"] = (self.section, own_pool(self.instance, self.section))
        own: PKeyMapping | None = cached[1]
        return pool_of(self.instance, own, config)

    def allocate(self, network: Network, used: Collection[Segment], config: Any) -> Segment | None:
        """The lowest free segmentation id of this instance's pool whose PKey is free too."""
        pool, field = self.pool(config)
        used_pkeys = {pk.value & 0x7FFF for s in used if (pk := segment_pkey(s)) is not None}  # every sibling's, as the store's
        # a shared pool counts every sibling's partitions (as before instances had pools); a pool of
        # its own, the subnet's own segments
        on_subnet = used_pkeys if pool is global_section(config).pool else {
            pk.value & 0x7FFF for s in used if (pk := segment_pkey(s)) is not None and s.fabric == self.instance}  # fmt: skip
        if len(on_subnet) >= IPOIB_PARTITION_LIMIT:
            raise ExhaustedError(
                f"{len(on_subnet)} InfiniBand partitions exist: each takes one multicast LID for its IPoIB "
                f"broadcast group and the switches hold {IPOIB_PARTITION_LIMIT + 1} (MulticastFDBCap, "
                "one for the default partition); delete a network first",
                field=field,
                limit=IPOIB_PARTITION_LIMIT,
            )
        free = [i for i in pool.seg_ids() if pool.pkey_for(i).value not in used_pkeys]
        seg = allocate(free, {s.seg_id for s in used}, field)
        return pkey_segment(self.instance, seg, pool.pkey_for(seg))

    def adopt(self, network: Network, seg_id: int, used: Collection[Segment], config: Any) -> Segment:
        """Segmentation id ``seg_id`` of this instance's pool and its PKey, both free on every
        instance sharing the pool (a pool of its own is disjoint from the others')."""
        pool, _ = self.pool(config)
        if seg_id not in pool.seg_ids():
            raise ValidationError(f"segments.{self.instance}.seg_id", seg_id, str(pool.seg_range))
        pkey = pool.pkey_for(seg_id)
        pkeys = {pk.value & 0x7FFF for s in used if (pk := segment_pkey(s)) is not None}
        if seg_id in {s.seg_id for s in used} or pkey.value & 0x7FFF in pkeys:
            raise ConflictError(f"{self.instance} segment {seg_id} is already used", field="segments", value=seg_id)
        return pkey_segment(self.instance, seg_id, pkey)

    def segment_options(self, raw: Mapping[str, Any], where: str) -> tuple[tuple[str, int | bool], ...]:
        """A network's own IPoIB settings on this subnet: ``ipoib``, ``mtu``, ``rate``, ``sl``,
        ``scope`` (:func:`~gpufabric.fabrics.infiniband.state.ipoib.network_options`)."""
        return network_options(raw, where)

    def segment_label(self, segment: Segment) -> str:
        pk = segment_pkey(segment)
        return f"seg {segment.seg_id} -> pkey {pk}" if pk is not None else super().segment_label(segment)

    def segment_view(self, segment: Segment) -> Mapping[str, Any]:
        pk = segment_pkey(segment)
        return {"pkey": None if pk is None else str(pk)}

    def desired(self, tenancy: Tenancy) -> IbDesired:
        return desired_ib(tenancy, guids_setting(tenancy.settings, "sm_port_guids"), self.instance)

    def diff(self, desired: IbDesired, observed: IbFabricState) -> IbPlan:
        return diff_ib(desired, observed)

    def as_observed(self, desired: IbDesired) -> IbFabricState:
        return as_observed_ib(desired)

    def empty_state(self) -> IbFabricState:
        return IbFabricState()

    def merge(self, observed: IbFabricState, read_back: IbFabricState) -> IbFabricState:
        return merge_ib(observed, read_back)

    def tenants_seen(self, observed: IbFabricState, tenancy: Tenancy) -> Mapping[str, frozenset[str]]:
        return ib_tenants_seen(observed, tenancy, self.instance)

    # ---- audit (:mod:`.audit`; standby SM files: :mod:`~gpufabric.fabrics.infiniband.audit.sm_files`)
    def invariants(self) -> tuple[InvariantSpec, ...]:
        return (*ib_audit.INVARIANTS, SM_FILES_SPEC)

    def audit(self, tenancy: Tenancy, desired: IbDesired | None, observed: IbFabricState) -> Iterable[Violation]:
        layout = desired.layout if desired is not None else None
        return [*ib_audit.violations(IbAudit.build(tenancy, layout, observed, self.instance)), *sm_file_violations(observed)]

    def ports_seen(self, observed: IbFabricState, tenancy: Tenancy) -> Iterable[PortSeen]:
        return ib_audit.ports_seen(tenancy, observed, self.instance)

    # ---- display
    def summary(self, node: Node, tenancy: Tenancy | None = None) -> str:
        return "\n".join(f"{p.device}/{p.port_num} {p.port_guid}" for p in self.ports(node))

    def cli_group(self) -> CliGroup:
        """``gpufabric ib keys`` (:mod:`views`)."""
        from gpufabric.fabrics.infiniband.views import cli_group

        return cli_group()

    def node_view(self, node: Node, tenancy: Tenancy | None = None) -> Mapping[str, Any]:
        return {"ports": [_port_json(p) for p in self.ports(node)]}


def _port_json(p: IbPort) -> dict[str, Any]:
    """One HCA port as the API shows it (``gpu``: the GPU module id whose rail it is, when recorded)."""
    return {"device": p.device, "port_num": p.port_num, "port_guid": str(p.port_guid), "node_guid": str(p.node_guid),
            "switch_guid": None if p.switch_guid is None else str(p.switch_guid), "switch_port": p.switch_port,
            **({"gpu": p.gpu} if p.gpu is not None else {})}  # fmt: skip


def _path(p: IbPort) -> SwitchPath:
    """``p``'s path up the subnet, as the last ibnetdiscover import found it; without one, its
    leaf by GUID when its cabling is known."""
    return p.path or (((str(p.switch_guid),),) if p.switch_guid is not None else ())
