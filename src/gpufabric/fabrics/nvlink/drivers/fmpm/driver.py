"""The ``fmpm`` driver: each node's Fabric Manager through NVIDIA's Fabric-Manager-Client command
line (``fmpm``), one subprocess per call.

Fabric Manager cannot run on this machine (it needs NVSwitch hardware): this driver is written
against fmpm's documented interface and output (fmpm.cpp of NVIDIA/Fabric-Manager-Client) and
tested with recorded outputs and the lab's stand-in ``gpufabric.lab.fmpm_standin``. It is the
calls of the contract (:mod:`..base`), each one fmpm run: ``-l``, ``-a``/``-d ID``,
``--set-activated-list``, ``--list-unsupported-partitions``, ``--get-nvlink-failed-devices``;
observe, the order of a plan's changes and its verified read-back are the backend's
(``backend.py``).

* One FM per node: ``fm`` maps node -> address, ``unix:/path`` (``--unix-domain-socket``) or
  ``tcp:host`` / ``host`` (``--hostname``; FM's API port is its FM_CMD_PORT_NUMBER, default
  6666 - fmpm has no port flag, so only 6666 is accepted). FM's API has neither encryption nor
  authentication: a host other than loopback is reported by :meth:`Fmpm.transport_notes`
  (audit ``TRANSPORT-INSECURE``).
* A call FM refuses is an :class:`FmpmError` with FM's return code (``fmpm`` exits with it).
* ``smi`` (optional) maps node -> a command printing that node's ``nvidia-smi -q`` (e.g. over
  ssh): the GPUs' Fabric State/Status and NVLink domain.
* The options (fabrics.yaml ``nvlink.options`` but ``workers``) are :class:`FmpmConfig`'s fields,
  their one source: :class:`Fmpm` and the registered backend driver take a config or the options.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from gpufabric.domain.errors import ConfigError, FabricError
from gpufabric.fabrics.nvlink.drivers.base import DOMAINS, FAILED_DEVICES, REPLAY, UNSUPPORTED, FmCallError, FmDriver
from gpufabric.fabrics.nvlink.readers.fmpm import (
    FailedDevice,
    parse_failed_devices,
    parse_failure,
    parse_partition_list,
    parse_unsupported,
)
from gpufabric.fabrics.nvlink.readers.fmreturn import FmReturn
from gpufabric.fabrics.nvlink.state import FABRIC, NodeFm
from gpufabric.transport.secrets import TransportNote, is_loopback_host

FM_PORT = 6666


class FmpmError(FmCallError):
    """An fmpm call failed: ``fm_code`` is FM's return code (e.g. -7 in use)."""

    code = "fmpm"


def address_args(node: str, address: str) -> list[str]:
    """fmpm's connection flags for an FM address (ConfigError naming the node's entry)."""
    where = f"nvlink.options.fm.{node}"
    if not isinstance(address, str) or not address.strip():
        raise ConfigError(where, address, "unix:/path/to/socket, tcp:host or host")
    text = address.strip()
    if text.startswith("unix:"):
        path = text.removeprefix("unix:")
        if not path:
            raise ConfigError(where, address, "unix:/path/to/socket")
        return ["--unix-domain-socket", path]
    host = text.removeprefix("tcp:")
    if host.count(":") == 1:
        host, port = host.split(":")
        if port != str(FM_PORT):
            raise ConfigError(where, address, f"port {FM_PORT} (fmpm has no port option)")
    if not host:
        raise ConfigError(where, address, "unix:/path/to/socket, tcp:host or host")
    return ["--hostname", host]


def _command(where: str, raw: str | Sequence[str]) -> list[str]:
    cmd = shlex.split(raw) if isinstance(raw, str) else [str(x) for x in raw]
    if not cmd:
        raise ConfigError(where, raw, "a command (string or list)")
    return cmd


@dataclass(frozen=True)
class FmpmConfig:
    """The fmpm driver's options as written (checked when :class:`Fmpm` is built from them)."""

    fm: Mapping[str, str]  # node -> FM address: unix:/path, tcp:host or host
    fmpm: str | Sequence[str] = "fmpm"  # the fmpm command (string split as a shell would, or a list)
    timeout: float = 10.0  # seconds per fmpm (or smi) run
    smi: Mapping[str, str | Sequence[str]] | None = None  # node -> command printing its nvidia-smi -q
    env: Mapping[str, str] | None = None  # added to the environment of every run

    @classmethod
    def of(cls, config: FmpmConfig | None, options: Mapping[str, Any]) -> FmpmConfig:
        """``config``, or one made of ``options`` (TypeError naming an unknown or missing one)."""
        if config is None:
            return cls(**options)
        if not isinstance(config, FmpmConfig):
            raise TypeError(f"config: an FmpmConfig, not {type(config).__name__} (options by name: fm=...)")
        if options:
            raise TypeError(f"a config or options, not both (options {sorted(options)})")
        return config


class Fmpm(FmDriver):
    """Every node's Fabric Manager through ``fmpm``, one subprocess per call."""

    capabilities: ClassVar[frozenset[str]] = frozenset({REPLAY, FAILED_DEVICES, UNSUPPORTED, DOMAINS})

    def __init__(self, config: FmpmConfig | None = None, **options: Any) -> None:
        c = self.config = FmpmConfig.of(config, options)
        if not isinstance(c.fm, Mapping) or not c.fm:
            raise ConfigError("nvlink.options.fm", c.fm, "a mapping node -> FM address (unix:/path or tcp:host)")
        self.fm = {str(n): address_args(str(n), a) for n, a in c.fm.items()}
        self.fmpm = _command("nvlink.options.fmpm", c.fmpm)
        self.smi = {str(n): _command(f"nvlink.options.smi.{n}", cmd) for n, cmd in (c.smi or {}).items()}
        if not isinstance(c.timeout, (int, float)) or c.timeout <= 0:
            raise ConfigError("nvlink.options.timeout", c.timeout, "a positive number of seconds")
        self.timeout = float(c.timeout)
        self.env = {**os.environ, **{str(k): str(v) for k, v in (c.env or {}).items()}}

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted(self.fm))

    @property
    def smi_nodes(self) -> tuple[str, ...]:
        """The nodes with an ``smi`` command."""
        return tuple(sorted(self.smi))

    def transport_notes(self) -> tuple[TransportNote, ...]:
        """FM reached over TCP on another host (plain, unauthenticated), for the audit."""
        return tuple(
            TransportNote(node, "fm", f"Fabric Manager of {node} at {a[1]}:{FM_PORT} over plain TCP: "
                          "FM's API is unencrypted and unauthenticated")
            for node, a in sorted(self.fm.items()) if a[0] == "--hostname" and not is_loopback_host(a[1])
        )  # fmt: skip

    def _run(self, node: str, *args: str) -> str:
        if node not in self.fm:
            raise ConfigError("nvlink.options.fm", node, f"an FM address for node {node} ({', '.join(sorted(self.fm))})")
        cmd = [*self.fmpm, *self.fm[node], *args]
        shown = " ".join(shlex.quote(c) for c in cmd)
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout, env=self.env, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            code = FmReturn.TIMEOUT if isinstance(e, subprocess.TimeoutExpired) else FmReturn.CONNECTION_NOT_VALID
            raise FmpmError(f"{node}: {shown}: {e}", node=node, fm_code=int(code), command=shown) from None
        if p.returncode != 0:
            f = parse_failure(p.stdout + p.stderr, p.returncode)
            raise FmpmError(f"{node}: {shown}: {f.describe()}", node=node, fm_code=f.code, command=shown)
        return p.stdout

    def list_partitions(self, node: str) -> NodeFm:
        return parse_partition_list(self._run(node, "-l"), node)

    def unsupported(self, node: str) -> frozenset[int]:
        return frozenset(p.id for p in parse_unsupported(self._run(node, "--list-unsupported-partitions")))

    def failed_devices(self, node: str) -> tuple[FailedDevice, ...]:
        return parse_failed_devices(self._run(node, "--get-nvlink-failed-devices"))

    def activate(self, node: str, partition: int) -> None:
        self._run(node, "-a", str(partition))

    def deactivate(self, node: str, partition: int) -> None:
        self._run(node, "-d", str(partition))

    def set_activated(self, node: str, partitions: Iterable[int]) -> None:
        self._run(node, "--set-activated-list", ",".join(map(str, partitions)))

    def smi_q(self, node: str) -> str:
        cmd = self.smi[node]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout, env=self.env, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise FabricError(f"{node}: nvidia-smi -q: {e}", fabric=FABRIC, device=node) from None
        if p.returncode != 0:
            raise FabricError(f"{node}: nvidia-smi -q exited {p.returncode}: {p.stderr.strip()}", fabric=FABRIC, device=node)
        return p.stdout

    def describe(self) -> dict[str, Any]:
        return {"driver": "fmpm", "fmpm": self.fmpm, "nodes": sorted(self.fm)}
