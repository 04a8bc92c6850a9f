"""The NVLink driver contract: the calls the backend (``backend.py``) makes of each node's
Fabric Manager, one driver per way of reaching FM (``drivers/fmpm/``: NVIDIA's
Fabric-Manager-Client command line).

A driver lists a node's partitions (``list_partitions``: FM's supported partitions, which are
active, its GPUs) and activates or deactivates one; the order of a plan's changes, their
verified read-back and GPU health are the backend's. Optional powers are declared in
``capabilities``, never found by ``isinstance``: :data:`REPLAY` (``set_activated``: tell a
restarted FM its active set), :data:`UNSUPPORTED` (``unsupported``), :data:`FAILED_DEVICES`
(``failed_devices``) and :data:`DOMAINS` (``smi_q``: a node's ``nvidia-smi -q``, for the nodes in
``smi_nodes``: GPU fabric health and the NVLink domain).

Every failure of FM is an :class:`FmCallError` (the project's ``FabricError`` tree) carrying
FM's return code (``fm_code``, :class:`~gpufabric.fabrics.nvlink.readers.fmreturn.FmReturn`):
-7 activating an active partition, -4 deactivating an inactive one (the backend counts both
as done once read back so), -1 an unknown partition id, -9 no FM; one line naming the node.
A node the driver does not reach is a ConfigError naming ``nvlink.options.fm``. The
conformance suite is tests/fabrics/nvlink/contract/test_nvlink_driver_contract.py.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, ClassVar, Final

from gpufabric.domain.errors import FabricError
from gpufabric.fabrics.nvlink.readers.fmpm import FailedDevice
from gpufabric.fabrics.nvlink.state import FABRIC, NodeFm
from gpufabric.transport.secrets import TransportNote

REPLAY: Final = "replay"
UNSUPPORTED: Final = "unsupported"
FAILED_DEVICES: Final = "failed-devices"
DOMAINS: Final = "domains"


class FmCallError(FabricError):
    """A call to a node's Fabric Manager failed: ``fm_code`` is FM's return code (e.g. -7 in use)."""

    code = "fm"

    def __init__(self, message: str, *, node: str, fm_code: int, command: str) -> None:
        super().__init__(message, fabric=FABRIC, device=node, fm_code=fm_code, command=command)
        self.fm_code = fm_code


class FmDriver(ABC):
    """Every node's Fabric Manager, one call at a time (thread-safe across nodes)."""

    capabilities: ClassVar[frozenset[str]] = frozenset()

    @property
    @abstractmethod
    def nodes(self) -> tuple[str, ...]:
        """The nodes whose Fabric Manager this driver reaches, sorted."""

    @abstractmethod
    def list_partitions(self, node: str) -> NodeFm:
        """``node``'s supported partitions, its active set and its GPUs as FM reports them now."""

    @abstractmethod
    def activate(self, node: str, partition: int) -> None:
        """Activate one partition (FmCallError with FM's code when FM refuses)."""

    @abstractmethod
    def deactivate(self, node: str, partition: int) -> None:
        """Deactivate one partition (FmCallError with FM's code when FM refuses)."""

    def set_activated(self, node: str, partitions: Iterable[int]) -> None:
        """Capability :data:`REPLAY`: the active set of a restarted FM (checked by FM as a whole)."""
        raise NotImplementedError(REPLAY)

    def unsupported(self, node: str) -> frozenset[int]:
        """Capability :data:`UNSUPPORTED`: the partition ids FM cannot activate now."""
        raise NotImplementedError(UNSUPPORTED)

    def failed_devices(self, node: str) -> tuple[FailedDevice, ...]:
        """Capability :data:`FAILED_DEVICES`: the NVLink-failed GPUs and switches of ``node``."""
        raise NotImplementedError(FAILED_DEVICES)

    @property
    def smi_nodes(self) -> tuple[str, ...]:
        """Capability :data:`DOMAINS`: the nodes whose ``nvidia-smi -q`` this driver reads."""
        return ()

    def smi_q(self, node: str) -> str:
        """Capability :data:`DOMAINS`: ``node``'s ``nvidia-smi -q``, read now."""
        raise NotImplementedError(DOMAINS)

    def transport_notes(self) -> tuple[TransportNote, ...]:
        """How each FM is reached, when not safely (for the audit's ``TRANSPORT-INSECURE``)."""
        return ()

    def describe(self) -> dict[str, Any]:
        return {"nodes": list(self.nodes)}
