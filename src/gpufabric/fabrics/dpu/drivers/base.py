"""The contracts of the DPU fabric's three drivers, as :class:`~gpufabric.fabrics.dpu.backend.DpuBackend`
uses them (``tests/fabrics/dpu/contract/test_dpu_driver_contract.py`` holds every implementation to them).

* :class:`OvnDriver` (entry point ``ovn-nb``): the tenants' logical switch ports in the OVN
  northbound DB (:mod:`.ovn`);
* :class:`NodeLabelDriver` (entry point ``k8s-nodes``): the DPU-role labels and the dpu-host
  taint of Kubernetes Nodes (:mod:`.k8s`); its optional power ``drain`` (cordon, drain through
  the Eviction API, uncordon) is declared by a non-None ``api``;
* :class:`HostOvsDriver` (entry point ``dpu-ovsdb``): the managed keys of one DPU host's
  DPU-side OVS (:mod:`.host`), and :class:`CommandRunner`, where the DPU host's datapath
  commands run (``ovs-appctl``, ``tc``): on the DPU's Arm side over SSH (:mod:`.host.sshrun`),
  and :class:`FactsReader`, the DPU's mode and firmware read with NVIDIA's tools
  (:mod:`.host.mst`): a failed read is facts with ``error`` set, never an exception.

Every ``apply(removes, adds)`` is one transaction followed by a read-back: it returns what it
read back of the objects it touched and raises :class:`~gpufabric.domain.errors.ApplyError`
when the device did not take a change; an unreachable device is a
:class:`~gpufabric.domain.errors.FabricError`; a bad section or remote a
:class:`~gpufabric.domain.errors.ConfigError` naming its field. ``transport_notes`` reports what
the driver's own transport leaves open (audit ``TRANSPORT-INSECURE``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from gpufabric.fabrics.dpu.entries.info import DpuInfo
from gpufabric.fabrics.dpu.readers.dpumode import DpuFacts
from gpufabric.fabrics.dpu.state import Label, LogicalPort, OvsSetting, Taint
from gpufabric.transport.secrets import TransportNote

__all__ = ["CommandRunner", "FactsReader", "HostOvsDriver", "NodeLabelDriver", "OvnDriver"]


@runtime_checkable
class OvnDriver(Protocol):
    """The OVN northbound DB: one ``gf-<tenant>`` logical switch per tenant with its ports;
    a switch left without ports is deleted."""

    remote: str

    def read(self) -> frozenset[LogicalPort]: ...

    def apply(self, removes: Sequence[LogicalPort], adds: Sequence[LogicalPort]) -> frozenset[LogicalPort]: ...

    def transport_notes(self) -> tuple[TransportNote, ...]: ...


@runtime_checkable
class NodeLabelDriver(Protocol):
    """Kubernetes Nodes: only the managed labels and taints are read and changed."""

    api: Any  # the CoreV1 API (cordon/drain use it), None when the driver cannot drain

    def read(self, nodes: Sequence[str] | None = None) -> tuple[frozenset[Label], frozenset[Taint]]: ...

    def apply(
        self, removes: Sequence[Label | Taint], adds: Sequence[Label | Taint]
    ) -> tuple[frozenset[Label], frozenset[Taint]]: ...

    def transport_notes(self) -> tuple[TransportNote, ...]: ...


@runtime_checkable
class HostOvsDriver(Protocol):
    """One DPU host's DPU-side OVS (``Open_vSwitch`` row): only the managed keys."""

    host: str
    remote: str

    def read(self) -> frozenset[OvsSetting]: ...

    def apply(self, removes: Sequence[OvsSetting], adds: Sequence[OvsSetting]) -> frozenset[OvsSetting]: ...

    def transport_notes(self) -> tuple[TransportNote, ...]: ...


@runtime_checkable
class CommandRunner(Protocol):
    """Runs argument vectors on one DPU (no shell: each argument quoted); its stdout, a non-zero
    exit status or a refused connection (e.g. an unknown host key) a ``FabricError``."""

    def run(self, args: Sequence[str]) -> str: ...

    def transport_notes(self) -> tuple[TransportNote, ...]: ...

    def close(self) -> None: ...


@runtime_checkable
class FactsReader(Protocol):
    """A DPU's mode and firmware, read now (``mlxconfig``, ``flint`` or ``mlxfwmanager``, and
    ``mlxprivhost``, on the host, over SSH or through an agent: the section's argv prefix). A read
    that fails is :class:`DpuFacts` with ``error`` set and mode ``unknown``: the gate refuses on it."""

    def read(self, info: DpuInfo) -> DpuFacts: ...
