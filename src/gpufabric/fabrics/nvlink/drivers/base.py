"""The NVLink driver contract: one Fabric Manager per node, reached by a driver that is the
kind's :class:`~gpufabric.domain.fabric.FabricBackend` (``fmpm`` today: ``drivers/fmpm/``).

What the kind, its views and the service call of a driver, and nothing more:

* ``observe()`` reads every node's partitions, active set and GPU health; ``apply(plan)`` runs
  every deactivation before any activation and returns the **verified read-back** of the
  touched nodes (a change not read back as asked is a :class:`VerifyError`; an activation of
  an active partition, a deactivation of an inactive one, is done when read back so);
* ``read_node(node)`` reads one node (the site check's reachability probe);
* optional powers are declared in ``capabilities``, never found by ``isinstance``:
  :data:`REPLAY` (``replay(node, ids)``: tell a restarted FM its active set, verified),
  :data:`FAILED_DEVICES` (``failed_devices(node)``), :data:`DOMAINS` (``domains()`` and
  ``domains_text()``: each node's NVLink domain from ``nvidia-smi -q``, for the nodes in
  ``domain_nodes``).

Every failure is a :class:`~gpufabric.domain.errors.FabricError`: a refusal of Fabric Manager
is an :class:`FmCallError` carrying FM's return code (``fm_code``, ``readers.fmreturn``); a bad
node or partition id is refused before any call, one line naming the field. The conformance
suite is tests/contract/test_nvlink_driver_contract.py.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable
from typing import ClassVar, Final

from gpufabric.domain.errors import FabricError
from gpufabric.domain.fabric import FabricBackend
from gpufabric.fabrics.nvlink.entries import NvlinkDomain
from gpufabric.fabrics.nvlink.readers.fmpm import FailedDevice
from gpufabric.fabrics.nvlink.state import FABRIC, NodeFm, NvlinkState

REPLAY: Final = "replay"
FAILED_DEVICES: Final = "failed-devices"
DOMAINS: Final = "domains"


class FmCallError(FabricError):
    """A call to a node's Fabric Manager failed: ``fm_code`` is FM's return code (e.g. -7 in use)."""

    code = "fm"

    def __init__(self, message: str, *, node: str, fm_code: int, command: str) -> None:
        super().__init__(message, fabric=FABRIC, device=node, fm_code=fm_code, command=command)
        self.fm_code = fm_code


class NvlinkDriver(FabricBackend[NvlinkState]):
    """One NVLink fabric: every node's Fabric Manager, with verified read-back."""

    kind: ClassVar[str] = "nvlink"

    @property
    @abstractmethod
    def nodes(self) -> tuple[str, ...]:
        """The nodes whose Fabric Manager this driver reaches, sorted."""

    @abstractmethod
    def read_node(self, node: str, *, health: bool = True) -> NodeFm:
        """``node``'s partitions, active set and (with ``health``) its GPUs' health, read now."""

    def replay(self, node: str, partitions: Iterable[int] | None = None) -> NodeFm:
        """Capability :data:`REPLAY`: tell a restarted FM its active set (``partitions``, or the
        last set this driver verified) and return the verified read-back."""
        raise NotImplementedError(REPLAY)

    def failed_devices(self, node: str) -> tuple[FailedDevice, ...]:
        """Capability :data:`FAILED_DEVICES`: the NVLink-failed GPUs and switches of ``node``."""
        raise NotImplementedError(FAILED_DEVICES)

    @property
    def domain_nodes(self) -> tuple[str, ...]:
        """Capability :data:`DOMAINS`: the nodes whose NVLink domain this driver can read."""
        return ()

    def domains(self) -> dict[str, NvlinkDomain]:
        """Capability :data:`DOMAINS`: each node's NVLink domain, read now."""
        raise NotImplementedError(DOMAINS)

    def domains_text(self) -> str:
        """Capability :data:`DOMAINS`: every node's ``nvidia-smi -q`` as pdsh prints it."""
        raise NotImplementedError(DOMAINS)
