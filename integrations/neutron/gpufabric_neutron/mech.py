"""The ``gpufabric`` ML2 mechanism driver: bare-metal ports bound through gpufabric.

- ``create_network_postcommit``: a network with a VLAN segment on one of gpufabric's
  physnets becomes a gpufabric network with Neutron's segmentation id adopted (not
  re-allocated) on the physnet's fabric instance (:mod:`gpufabric_neutron.physnets`):
  Ethernet physnets → Ethernet VLAN, each IB physnet → InfiniBand fake VLAN on its own subnet
  (gpufabric maps it to a PKey and refuses one outside its mapped range with a 422, which
  fails the network create); segments on two IB physnets make one network on both subnets. Segments on other physnets are ignored, so each fabric only
  sees its own networks. 409 (exists: a retry, or a network re-synced) is success.
- ``bind_port`` (``binding:vnic_type=baremetal`` only) first checks, reading gpufabric only:
  the port's project is its network's project (the node goes into the PORT's project; a port
  on another project's network is refused, never attached into the network's project);
  ``binding:host_id`` (Ironic's node UUID) names a gpufabric node (``node_map`` if set, else
  the node gpufabric stores that host id for: ``GET /nodes?host_id=``, else the host id as a name); every link of ``binding:profile.local_link_information`` (switch + port, or the IB
  port GUID, on the segment's own IB instance) is a port of that node (``GET /nodes/{name}``),
  so link info alone never picks a node (of several of our segments, the first whose checks
  pass is bound: an HCA binds the segment of its own subnet); and the node is in quarantine or already the port's project's. A refusal writes
  nothing to gpufabric and leaves the port ``binding_failed``. Then gpufabric is asked to
  attach the node to the network: a node changing tenant goes through its move workflow
  (quarantine, then join, each verified on the fabric); a node already in the network's
  tenant gets the network added to its lease and gpufabric's worker converges the fabrics.
  The binding completes (``set_binding``, ACTIVE) only when the move is ``done`` (or the
  worker has run its converge pass without error). A retry that finds an open move on the
  node waits for it and tries again; "already attached" is success. Any failure (refused,
  API error, move failed, timeout) leaves the port unbound (``binding_failed``) and is
  logged; on timeout the driver asks gpufabric to detach the node again so it is never on
  the network behind Neutron's back.
- Unbind (``update_port_postcommit`` when the binding went away or moved, and
  ``delete_port_postcommit``): gpufabric detaches the node the binding recorded
  (``binding:vif_details.gpufabric_node``) from the network (back to quarantine if it was its
  last).

- Ironic's own networks (``ironic_networks``: provisioning, cleaning, ...) are gpufabric's
  quarantine (:mod:`gpufabric_neutron.ironic`): a bind there moves the node to quarantine on
  every fabric; with ``ironic_url``, a tenant bind is refused while Ironic cleans the node.

The token is a gpufabric ``service`` token (not admin): see docs/openstack.md.

Limitation: attachments are per node and network, so two Neutron ports of one node on the
same network share one attachment; unbinding either detaches the node.
"""

from __future__ import annotations

import json
import os
from typing import Any

from neutron_lib import constants as n_const
from neutron_lib import exceptions as n_exc
from neutron_lib.api.definitions import portbindings
from neutron_lib.plugins.ml2 import api
from oslo_config import cfg
from oslo_log import log as logging

from gpufabric_neutron import client as gf
from gpufabric_neutron import config, ironic, names, physnets

LOG = logging.getLogger(__name__)

BOUND_VIF = portbindings.VIF_TYPE_OTHER
QUARANTINE = "quarantine"


class GpufabricDriverError(n_exc.NeutronException):  # type: ignore[misc]
    message = "gpufabric: %(reason)s"


class Refused(LookupError):
    """The port may not be bound to the node it names (nothing was written to gpufabric)."""


class GpufabricMechanismDriver(api.MechanismDriver):  # type: ignore[misc]
    """ML2 driver for bare-metal ports on gpufabric's Ethernet and InfiniBand fabrics."""

    client: gf.GpufabricClient
    physnets: names.Physnets

    def initialize(self) -> None:
        conf = config.register(cfg.CONF).ml2_gpufabric
        self.conf = conf
        token = gf.read_token(conf.token_file)
        self.client = gf.GpufabricClient(
            conf.url, token, ca_file=conf.ca_file, insecure=conf.insecure, timeout=conf.timeout,
            retry_for=conf.retry_for,
        )  # fmt: skip
        self._node_map: tuple[float, dict[str, str]] = (-1.0, {})
        # a bad mapping fails the start with one line naming the option (PhysnetError)
        self.physnets = physnets.parse(conf.ethernet_physnets, conf.ib_physnets, conf.ib_physnet)
        if conf.ib_physnets and conf.ib_physnet and conf.ib_physnet not in self.physnets.ib:
            LOG.warning("gpufabric: ib_physnet %s ignored: ib_physnets is set (%s)", conf.ib_physnet,
                        ",".join(conf.ib_physnets))  # fmt: skip
        self.node_map()  # a bad node_map fails the start, not each bind
        self.ironic_networks = frozenset(conf.ironic_networks or ())
        self.ironic: ironic.IronicNodes | None = None
        if conf.ironic_url:
            itoken = gf.read_token(conf.ironic_token_file) if conf.ironic_token_file else None
            self.ironic = ironic.IronicNodes(conf.ironic_url, itoken, ca_file=conf.ironic_ca_file, insecure=conf.insecure,
                                             timeout=conf.timeout)  # fmt: skip
        LOG.info("gpufabric driver: %s, %s", conf.url, self.physnets.describe())

    @property
    def connectivity(self) -> str:
        return str(portbindings.CONNECTIVITY_L2)

    # ---- networks
    def create_network_postcommit(self, context: Any) -> None:
        net = context.current
        segments = self.physnets.gpufabric_segments(context.network_segments)
        if not segments or ironic.is_ironics(net, self.ironic_networks):  # Ironic's: gpufabric's quarantine
            return
        try:
            self._ensure_network(net, segments)
        except (gf.ApiError, gf.Unreachable) as e:
            LOG.error("gpufabric: network %s (%s) refused: %s", net["id"], segments, e)
            raise GpufabricDriverError(reason=str(e)) from e

    def delete_network_postcommit(self, context: Any) -> None:
        net = context.current
        if not self.physnets.gpufabric_segments(context.network_segments) or ironic.is_ironics(net, self.ironic_networks):
            return
        try:
            self.client.delete_network(names.tenant_name(net["project_id"]), names.network_name(net["id"]))
        except (gf.ApiError, gf.Unreachable) as e:
            LOG.error("gpufabric: deleting network %s failed: %s", net["id"], e)
            raise GpufabricDriverError(reason=str(e)) from e

    def update_network_postcommit(self, context: Any) -> None:
        """A network of ours renamed, described or tagged in Neutron: its gpufabric network (named
        by the Neutron id, so never renamed) gets the Neutron name and description as its
        description and the Neutron tags gpufabric takes as its tags (:func:`names.about`).
        Segments are gpufabric's at create only: a segment change is not forwarded."""
        net, old = context.current, context.original or {}
        if not self.physnets.gpufabric_segments(context.network_segments) or ironic.is_ironics(net, self.ironic_networks):
            return
        changes = names.about(net)
        if old and names.about(old) == changes:
            return
        if dropped := names.dropped_tags(net):
            LOG.warning("gpufabric: network %s: tags %s not forwarded (%s)", net["id"], dropped, names.TAG_ALLOWED)
        try:
            self.client.update_network(names.tenant_name(net["project_id"]), names.network_name(net["id"]), changes)
        except (gf.ApiError, gf.Unreachable) as e:
            LOG.error("gpufabric: updating network %s failed: %s", net["id"], e)
            raise GpufabricDriverError(reason=str(e)) from e

    def _ensure_network(self, net: dict[str, Any], segments: list[dict[str, Any]]) -> tuple[str, str]:
        tenant = names.tenant_name(net["project_id"])
        name = names.network_name(net["id"])
        self.client.ensure_tenant(tenant)
        self.client.ensure_network(name, tenant, segments)
        return tenant, name

    # ---- ports
    def bind_port(self, context: Any) -> None:
        port = context.current
        if port.get(portbindings.VNIC_TYPE) != portbindings.VNIC_BAREMETAL:
            return
        ours = [seg for seg in context.segments_to_bind if self.physnets.fabric_of(seg) is not None]
        if ours and ironic.is_ironics(context.network.current, self.ironic_networks):
            self._bind_quarantine(context, ours)
            return
        refused: list[str] = []
        for seg in ours:  # several IB subnets: the segment whose subnet has the port's HCA
            fabric, instance = self.physnets.place(seg) or (names.ETHERNET, names.ETHERNET)
            where = f"{fabric} segment {seg.get(api.SEGMENTATION_ID)} ({instance})"
            try:
                node, _ = self._check(port, context.network.current, fabric, instance)
            except Refused as e:
                refused.append(f"{where}: {e}")
                continue
            except (gf.ApiError, gf.Unreachable, LookupError) as e:
                LOG.error("gpufabric: binding port %s on %s failed: %s", port["id"], where, e)
                return  # no set_binding: ML2 marks the port binding_failed
            try:
                self._attach(context, node)
            except (gf.ApiError, gf.Unreachable, gf.MoveFailed, LookupError) as e:
                LOG.error("gpufabric: binding port %s on %s %s: %s", port["id"], where,
                          "refused" if isinstance(e, Refused) else "failed", e)  # fmt: skip
                return
            context.set_binding(seg[api.ID], BOUND_VIF, {"gpufabric_node": node}, status=n_const.PORT_STATUS_ACTIVE)
            LOG.info("gpufabric: port %s bound: node %s on %s", port["id"], node, where)
            return
        if refused:
            LOG.error("gpufabric: binding port %s refused: %s", port["id"], "; ".join(refused))

    def _bind_quarantine(self, context: Any, ours: list[dict[str, Any]]) -> None:
        """A port on one of Ironic's networks (provisioning, cleaning, ...): the host's node to
        quarantine on every fabric (its lease ended, the move verified), then bound. Refused
        (nothing written) when the link info is not the host's node's."""
        port = context.current
        for seg in ours:
            fabric, instance = self.physnets.place(seg) or (names.ETHERNET, names.ETHERNET)
            try:
                node = self._host_node(port)
                info = self.client.node(node)
                if info is None:
                    raise Refused(f"binding:host_id {port.get(portbindings.HOST_ID)!r}: gpufabric has no node {node}")
                self._check_links(port, node, info, fabric, instance)
            except Refused as e:
                LOG.error("gpufabric: binding port %s on Ironic's network %s refused: %s", port["id"],
                          context.network.current.get("name"), e)  # fmt: skip
                continue
            except (gf.ApiError, gf.Unreachable) as e:
                LOG.error("gpufabric: binding port %s on Ironic's network failed: %s", port["id"], e)
                return
            try:
                ended = ironic.quarantine(self.client, node, self.conf.bind_timeout, self.conf.poll_interval)
            except (gf.ApiError, gf.Unreachable, gf.MoveFailed) as e:
                LOG.error("gpufabric: node %s to quarantine for Ironic's network failed: %s", node, e)
                return
            context.set_binding(seg[api.ID], BOUND_VIF, {"gpufabric_node": node, "gpufabric_quarantine": True},
                                status=n_const.PORT_STATUS_ACTIVE)  # fmt: skip
            LOG.info("gpufabric: port %s bound on Ironic's network %s: node %s in quarantine (%s)", port["id"],
                     context.network.current.get("name"), node, "lease ended" if ended else "already there")  # fmt: skip
            return

    def _attach(self, context: Any, node: str) -> str:
        net = context.network.current
        tenant, name = self._ensure_network(net, self.physnets.gpufabric_segments(context.network.network_segments))
        timeout, interval = self.conf.bind_timeout, self.conf.poll_interval
        for attempt in range(3):
            before = self.client.worker()
            try:
                result = self.client.attach(node, name, tenant)
            except gf.ApiError as e:  # an open move on the node (a retry of ours, or another change)
                if attempt < 2 and self.client.wait_open_move(e, timeout, interval):
                    continue
                raise
            try:
                self.client.wait_applied(result, before, timeout, interval)
            except gf.MoveFailed as e:
                if e.move.get("status") not in gf.TERMINAL:  # timed out: do not leave it to land unseen
                    self._detach_quietly(node, name)
                raise
            return node
        raise gf.MoveFailed({}, f"node {node} kept having open moves")

    def _check(
        self, port: dict[str, Any], net: dict[str, Any], fabric: str, instance: str | None = None
    ) -> tuple[str, str]:
        """The node and tenant a bind may use, or Refused; reads gpufabric, writes nothing."""
        project = port.get("project_id") or port.get("tenant_id")
        net_project = net.get("project_id") or net.get("tenant_id")
        if not project:
            raise Refused(f"port {port.get('id')} has no project_id")
        if project != net_project:
            raise Refused(f"port {port.get('id')} of project {project} is on network {net.get('id')} of project "
                          f"{net_project}: a node is attached only into the port's own project")  # fmt: skip
        tenant = names.tenant_name(project)
        node = self._host_node(port)
        info = self.client.node(node)
        if info is None:
            raise Refused(f"binding:host_id {port.get(portbindings.HOST_ID)!r}: gpufabric has no node {node}")
        self._check_links(port, node, info, fabric, instance)
        host = port.get(portbindings.HOST_ID)
        if self.ironic is not None and isinstance(host, str):
            why = ironic.cleaning(node, host, self.ironic.provision_state(host))
            if why:
                raise Refused(why)
        holder = info.get("tenant")
        if holder not in (None, QUARANTINE, tenant):
            raise Refused(f"node {node} is held by another tenant; allowed: a node in quarantine or already "
                          f"in {tenant} (the port's project)")  # fmt: skip
        return node, tenant

    def _host_node(self, port: dict[str, Any]) -> str:
        """The node ``binding:host_id`` names: its ``node_map`` entry (when one is configured),
        else the node gpufabric stores that host id for (Ironic's UUID, from ``inventory import
        --from ironic``), else the host id itself when it is a node name."""
        host = port.get(portbindings.HOST_ID)
        mapped = self.node_map()
        if isinstance(host, str) and host and host not in mapped:
            found = self.client.node_by_host(host)
            if found is not None:
                return found
        node = names.node_name(host, mapped)
        if node is None:
            raise Refused(f"binding:host_id {host!r} names no gpufabric node (no node has that host id; not in "
                          "node_map; not a node name)")  # fmt: skip
        return node

    def _check_links(self, port: dict[str, Any], node: str, info: dict[str, Any], fabric: str,
                     instance: str | None = None) -> None:  # fmt: skip
        profile = port.get(portbindings.PROFILE) or {}
        links = names.links(profile, fabric)
        if not links:
            raise Refused(f"no usable local_link_information in binding:profile {profile!r}")
        foreign = names.foreign_links(links, info, instance if fabric == names.INFINIBAND else None)
        if foreign:
            on = f" on {instance}" if fabric == names.INFINIBAND and instance else ""
            raise Refused(f"local_link_information {', '.join(map(names.describe, foreign))} is not a port of "
                          f"node {node}{on} (binding:host_id {port.get(portbindings.HOST_ID)!r})")  # fmt: skip

    def node_map(self) -> dict[str, str]:
        """``node_map`` (JSON {host id: node}), re-read when its mtime changes; {} when unset."""
        path = self.conf.node_map
        if not path:
            return {}
        try:
            mtime = os.stat(path).st_mtime
            if mtime != self._node_map[0]:
                with open(path, encoding="utf-8") as f:
                    data = json.load(f)
                if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
                    raise ValueError("want a JSON object {host id: node name}")
                self._node_map = (mtime, {str(k): v for k, v in data.items()})
        except (OSError, ValueError) as e:
            raise Refused(f"node_map {path}: {e}") from None
        return self._node_map[1]

    def _detach_quietly(self, node: str, network: str) -> None:
        try:
            self.client.detach(node, network)
        except (gf.ApiError, gf.Unreachable) as e:
            LOG.error("gpufabric: could not detach node %s from %s after a failed bind: %s", node, network, e)

    def update_port_postcommit(self, context: Any) -> None:
        old = context.original
        if old is None or not self._bound_by_us(old, context.original_top_bound_segment):
            return
        new = context.current
        still = (
            new.get(portbindings.VIF_TYPE) == BOUND_VIF
            and new.get(portbindings.HOST_ID) == old.get(portbindings.HOST_ID)
            and _lli(new) == _lli(old)
        )
        if not still:
            self._detach(old, context.original_top_bound_segment, context.network.current)

    def delete_port_postcommit(self, context: Any) -> None:
        port = context.current
        if self._bound_by_us(port, context.top_bound_segment):
            self._detach(port, context.top_bound_segment, context.network.current)

    def _bound_by_us(self, port: dict[str, Any], segment: dict[str, Any] | None) -> bool:
        """A tenant binding of ours (a binding on Ironic's network left the node in quarantine:
        its unbind changes nothing)."""
        return (
            not (port.get(portbindings.VIF_DETAILS) or {}).get("gpufabric_quarantine")
            and port.get(portbindings.VNIC_TYPE) == portbindings.VNIC_BAREMETAL
            and port.get(portbindings.VIF_TYPE) == BOUND_VIF
            and segment is not None
            and self.physnets.fabric_of(segment) is not None
        )

    def _detach(self, port: dict[str, Any], segment: dict[str, Any], net: dict[str, Any]) -> None:
        fabric, instance = self.physnets.place(segment) or (names.ETHERNET, names.ETHERNET)
        name = names.network_name(net["id"])
        try:
            node = self._bound_node(port, fabric, instance)
            before = self.client.worker()
            result = self.client.detach(node, name)
            self.client.wait_applied(result, before, self.conf.bind_timeout, self.conf.poll_interval)
        except LookupError as e:
            LOG.warning("gpufabric: port %s unbound, node unknown to gpufabric: %s", port["id"], e)
            return
        except (gf.ApiError, gf.Unreachable, gf.MoveFailed) as e:
            LOG.error("gpufabric: detaching port %s from %s failed: %s", port["id"], name, e)
            raise GpufabricDriverError(reason=str(e)) from e
        LOG.info("gpufabric: port %s unbound: node %s detached from %s", port["id"], node, name)

    def _bound_node(self, port: dict[str, Any], fabric: str, instance: str | None = None) -> str:
        """The node a binding of ours attached: as recorded in its vif_details, else (a binding
        older than that record) the host's node when the link info is one of its ports."""
        recorded = (port.get(portbindings.VIF_DETAILS) or {}).get("gpufabric_node")
        if isinstance(recorded, str) and recorded:
            return recorded
        node = self._host_node(port)
        info = self.client.node(node)
        if info is None:
            raise Refused(f"gpufabric has no node {node}")
        self._check_links(port, node, info, fabric, instance)
        return node


def _lli(port: dict[str, Any]) -> Any:
    return (port.get(portbindings.PROFILE) or {}).get("local_link_information")
