"""Fixtures: a loopback fake gpufabric and the driver configured against it, with
autospecced neutron_lib ML2 contexts (as networking-generic-switch's unit tests do)."""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from neutron_lib.api.definitions import portbindings
from neutron_lib.plugins.ml2 import api
from oslo_config import cfg

sys.path.insert(0, str(Path(__file__).parent))

from fake_gpufabric import FakeGpufabric
from gpufabric_neutron import config
from gpufabric_neutron.mech import GpufabricMechanismDriver

TOKEN = "s3cret-token"
NODE_MAP = {"node-uuid-1": "node1", "node-uuid-2": "node2"}  # binding:host_id (Ironic node UUID) -> gpufabric node


@pytest.fixture
def fake() -> Iterator[FakeGpufabric]:
    f = FakeGpufabric(TOKEN).start()
    f.state.switch_ports[("leaf1", "p1")] = "node1"
    f.state.switch_ports[("aa:bb:cc:dd:ee:01", "p1")] = "node1"
    f.state.switch_ports[("leaf1", "p2")] = "node2"
    f.state.guids["0x0002c90300000101"] = "node1"
    f.state.guids["0x0002c90300000201"] = "node2"
    yield f
    f.stop()


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    p = tmp_path / "gpufabric.token"
    p.write_text(TOKEN + "\n")
    os.chmod(p, 0o600)
    return p


@pytest.fixture
def node_map(tmp_path: Path) -> Path:
    p = tmp_path / "ironic-nodes.json"
    p.write_text(json.dumps(NODE_MAP))
    return p


@pytest.fixture
def conf(fake: FakeGpufabric, token_file: Path, node_map: Path) -> Iterator[cfg.ConfigOpts]:
    c = config.register(cfg.CONF)
    overrides = {"url": fake.url, "token_file": str(token_file), "ethernet_physnets": ["physnet1"],
                 "ib_physnet": "ib", "ib_physnets": [], "bind_timeout": 5.0, "poll_interval": 0.01, "retry_for": 3.0, "timeout": 2.0,
                 "insecure": True, "node_map": str(node_map)}  # fmt: skip  (the fake is plain http on loopback)
    for k, v in overrides.items():
        c.set_override(k, v, group=config.GROUP)
    yield c
    c.reset()
    for k in overrides:
        c.clear_override(k, group=config.GROUP)


@pytest.fixture
def driver(conf: cfg.ConfigOpts) -> GpufabricMechanismDriver:
    d = GpufabricMechanismDriver()
    d.initialize()
    return d


def segment(physnet: str | None, seg_id: int | None, network_type: str = "vlan") -> dict[str, Any]:
    return {api.ID: str(uuid.uuid4()), api.NETWORK_TYPE: network_type, api.PHYSICAL_NETWORK: physnet,
            api.SEGMENTATION_ID: seg_id}  # fmt: skip


def network_context(segments: list[dict[str, Any]], project: str = "tenant-a", net_id: str | None = None) -> Any:
    ctx = mock.create_autospec(api.NetworkContext, instance=True)
    ctx.current = {"id": net_id or str(uuid.uuid4()), "project_id": project, "name": "n"}
    ctx.original = None
    ctx.network_segments = segments
    return ctx


def port(
    lli: list[dict[str, Any]] | None,
    vnic: str = portbindings.VNIC_BAREMETAL,
    vif: str = portbindings.VIF_TYPE_UNBOUND,
    host: str = "node-uuid-1",
    project: str = "tenant-a",
) -> dict[str, Any]:
    profile = {} if lli is None else {"local_link_information": lli}
    return {"id": str(uuid.uuid4()), "project_id": project, "tenant_id": project, portbindings.VNIC_TYPE: vnic,
            portbindings.PROFILE: profile, portbindings.VIF_TYPE: vif, portbindings.HOST_ID: host}  # fmt: skip


def port_context(
    current: dict[str, Any],
    net: Any,
    segments_to_bind: list[dict[str, Any]] | None = None,
    original: dict[str, Any] | None = None,
    top: dict[str, Any] | None = None,
    original_top: dict[str, Any] | None = None,
) -> Any:
    ctx = mock.create_autospec(api.PortContext, instance=True)
    ctx.current = current
    ctx.original = original
    ctx.network = net
    ctx.segments_to_bind = segments_to_bind if segments_to_bind is not None else net.network_segments
    ctx.top_bound_segment = top
    ctx.original_top_bound_segment = original_top
    ctx.host = current[portbindings.HOST_ID]
    return ctx
