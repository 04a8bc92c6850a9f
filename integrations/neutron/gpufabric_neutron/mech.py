"""The ``gpufabric`` ML2 mechanism driver: bare-metal ports bound through gpufabric.

- ``create_network_postcommit``: a network with a VLAN segment on one of gpufabric's
  physnets becomes a gpufabric network with Neutron's segmentation id adopted (not
  re-allocated): Ethernet physnets → Ethernet VLAN, the IB physnet → InfiniBand fake VLAN
  (gpufabric maps it to a PKey and refuses one outside its mapped range with a 422, which
  fails the network create). Segments on other physnets are ignored, so each fabric only
  sees its own networks. 409 (exists: a retry, or a network re-synced) is success.
- ``bind_port`` (``binding:vnic_type=baremetal`` only): the node is found from
  ``binding:profile.local_link_information`` (switch + port, or the IB port GUID); gpufabric
  is asked to attach it to the network: a node changing tenant goes through its move
  workflow (quarantine, then join, each verified on the fabric); a node already in the
  network's tenant gets the network added to its lease and gpufabric's worker converges the
  fabrics. The binding completes (``set_binding``, ACTIVE) only when the move is ``done`` (or
  the worker has run its converge pass without error). A retry that finds an open move on
  the node waits for it and tries again; "already attached" is success. Any failure (unknown node, API error, move failed, timeout) leaves
  the port unbound (``binding_failed``) and is logged; on timeout the driver asks gpufabric
  to detach the node again so it is never on the network behind Neutron's back.
- Unbind (``update_port_postcommit`` when the binding went away or moved, and
  ``delete_port_postcommit``): gpufabric detaches the node (back to quarantine).

Limitation: attachments are per node and network, so two Neutron ports of one node on the
same network share one attachment; unbinding either detaches the node.
"""

from __future__ import annotations

from typing import Any

from neutron_lib import constants as n_const
from neutron_lib import exceptions as n_exc
from neutron_lib.api.definitions import portbindings
from neutron_lib.plugins.ml2 import api
from oslo_config import cfg
from oslo_log import log as logging

from gpufabric_neutron import client as gf
from gpufabric_neutron import config, names

LOG = logging.getLogger(__name__)

BOUND_VIF = portbindings.VIF_TYPE_OTHER


class GpufabricDriverError(n_exc.NeutronException):  # type: ignore[misc]
    message = "gpufabric: %(reason)s"


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
        self.physnets = names.Physnets(frozenset(conf.ethernet_physnets or ()), conf.ib_physnet or None)
        LOG.info("gpufabric driver: %s, ethernet physnets %s, ib physnet %s", conf.url,
                 sorted(self.physnets.ethernet), self.physnets.ib)  # fmt: skip

    @property
    def connectivity(self) -> str:
        return str(portbindings.CONNECTIVITY_L2)

    # ---- networks
    def create_network_postcommit(self, context: Any) -> None:
        net = context.current
        segments = self.physnets.gpufabric_segments(context.network_segments)
        if not segments:
            return
        try:
            self._ensure_network(net, segments)
        except (gf.ApiError, gf.Unreachable) as e:
            LOG.error("gpufabric: network %s (%s) refused: %s", net["id"], segments, e)
            raise GpufabricDriverError(reason=str(e)) from e

    def delete_network_postcommit(self, context: Any) -> None:
        net = context.current
        if not self.physnets.gpufabric_segments(context.network_segments):
            return
        try:
            self.client.delete_network(names.tenant_name(net["project_id"]), names.network_name(net["id"]))
        except (gf.ApiError, gf.Unreachable) as e:
            LOG.error("gpufabric: deleting network %s failed: %s", net["id"], e)
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
        profile = port.get(portbindings.PROFILE) or {}
        for seg in context.segments_to_bind:
            fabric = self.physnets.fabric_of(seg)
            if fabric is None:
                continue
            try:
                node = self._attach(context, fabric, profile)
            except (gf.ApiError, gf.Unreachable, gf.MoveFailed, LookupError) as e:
                LOG.error("gpufabric: binding port %s on %s segment %s failed: %s", port["id"], fabric,
                          seg.get(api.SEGMENTATION_ID), e)  # fmt: skip
                return  # no set_binding: ML2 marks the port binding_failed
            context.set_binding(seg[api.ID], BOUND_VIF, {"gpufabric_node": node}, status=n_const.PORT_STATUS_ACTIVE)
            LOG.info("gpufabric: port %s bound: node %s on %s segment %s", port["id"], node, fabric,
                     seg.get(api.SEGMENTATION_ID))  # fmt: skip
            return

    def _attach(self, context: Any, fabric: str, profile: dict[str, Any]) -> str:
        node = self._node(profile, fabric)
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

    def _node(self, profile: dict[str, Any], fabric: str) -> str:
        refs = names.link_refs(profile, fabric)
        if not refs:
            raise LookupError(f"no usable local_link_information in binding:profile {profile!r}")
        for r in refs:
            node = self.client.lookup_guid(r.guid) if r.guid else self.client.lookup_switch_port(r.switch or "", r.port or "")
            if node:
                return node
        raise LookupError(f"no gpufabric node has the port(s) {[vars(r) for r in refs]}")

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
        return (
            port.get(portbindings.VNIC_TYPE) == portbindings.VNIC_BAREMETAL
            and port.get(portbindings.VIF_TYPE) == BOUND_VIF
            and segment is not None
            and self.physnets.fabric_of(segment) is not None
        )

    def _detach(self, port: dict[str, Any], segment: dict[str, Any], net: dict[str, Any]) -> None:
        fabric = self.physnets.fabric_of(segment) or names.ETHERNET
        name = names.network_name(net["id"])
        try:
            node = self._node(port.get(portbindings.PROFILE) or {}, fabric)
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


def _lli(port: dict[str, Any]) -> Any:
    return (port.get(portbindings.PROFILE) or {}).get("local_link_information")
