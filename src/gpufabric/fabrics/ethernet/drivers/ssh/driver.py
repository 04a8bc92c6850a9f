"""SshSwitchDriver: an Ethernet switch driven over SSH, in one of the data dialects.

A batch of port changes becomes ONE session on ONE reused SSH connection: the dialect
renders every command (``dialects.render_batch``), :class:`SshConnection` sends them
together (one exec script, or one PTY-less stdin stream), and the output is checked
against the dialect's error regexes (and the exit status for ``exec`` dialects). A dialect
with ``commit`` / ``abort`` templates (EOS: a configuration session) stages the batch, and a
second session commits it, or aborts it when the first printed an error, so a refused line
leaves nothing applied. Any
failure raises ``ApplyError(fabric="ethernet", device=<switch>)`` carrying the offending
command and output. ``observe`` reads the running config and parses it with the pure
``readers.running_config.parse_running_config`` or, for dialects declaring a structured read (``json_read``:
NX-OS and EOS answer ``| json``), reads the JSON answers with the pure
``readers.jsonread.parse_*_json`` (text parsing stays for the platforms without a structured form,
and for a switch whose software refuses those commands: the driver then reads the text and
keeps doing so).

Concurrency is bounded per switch (a semaphore keyed by host:port shared by every driver
object in the process, ``max_sessions`` slots, default 1), so concurrent batches for one
switch queue instead of racing on its configuration.

Host keys are checked strictly by default: ``known_hosts`` (a file in OpenSSH format) is
required and unknown or changed keys are refused (paramiko ``RejectPolicy``). Only an
explicit ``insecure: true`` (and no ``known_hosts``) accepts any key, and the driver then
reports it (:meth:`SshSwitchDriver.transport_notes` -> audit ``TRANSPORT-INSECURE``). The
private key's passphrase comes from ``passphrase_file`` (0600) or ``passphrase_env``.

Only the ``ovs`` dialect (Linux + Open vSwitch, ``ovs-vsctl`` over SSH) runs here, in
tests/functional against a local sshd and a private OVS. The vendor dialects (nxos, eos,
junos, os10, sonic, nvue) are written against each vendor's documented CLI syntax and
tested with golden files (tests/fixtures/ssh/<dialect>/): rendered command sets and
recorded-format running configs.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from gpufabric.domain.errors import ApplyError, ConfigError, FabricError, ValidationError
from gpufabric.domain.values import VlanId
from gpufabric.fabrics.ethernet.drivers.base import EthernetSwitchDriver
from gpufabric.fabrics.ethernet.drivers.ssh.connection import CommandResult, SshConnection, SshTarget
from gpufabric.fabrics.ethernet.drivers.ssh.dialects import (
    Dialect,
    check_port_name,
    find_errors,
    load_dialect,
    render_batch,
    render_json_read,
    render_lines,
    render_read,
)
from gpufabric.fabrics.ethernet.readers.jsonread import JSON_READERS, ports_of
from gpufabric.fabrics.ethernet.readers.ovs_columns import check_quarantine_vlan
from gpufabric.fabrics.ethernet.readers.running_config import (
    interface_names,
    lists_every_interface,
    natural_key,
    parse_running_config,
)
from gpufabric.fabrics.ethernet.state import EthernetPortConfig, SwitchState
from gpufabric.transport.secrets import Secret, TransportNote, load_secret

_SLOTS: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_SLOTS_LOCK = threading.Lock()


def switch_slot(host: str, port: int, max_sessions: int = 1) -> threading.BoundedSemaphore:
    """The process-wide semaphore bounding concurrent sessions to one switch."""
    with _SLOTS_LOCK:
        return _SLOTS.setdefault((host, port), threading.BoundedSemaphore(max_sessions))


class SshSwitchDriver(EthernetSwitchDriver):
    """A switch reached over SSH and spoken to in ``dialect``.

    ``port_map`` maps inventory port names to device interface names (identity when
    omitted; when given, ``observe`` reports only mapped ports, by inventory name).
    ``variables`` override dialect template variables; ``command_prefix`` is a shortcut
    for the ``ovs`` dialect's ``vsctl`` (e.g. ``"ovs-vsctl --db=unix:/run/x/db.sock"``).
    ``bridge`` limits the ``ovs`` dialect's read-back to one bridge.
    """

    def __init__(
        self,
        *,
        host: str,
        username: str,
        key_filename: str,
        dialect: str | Dialect,
        switch: str,
        quarantine_vlan: int | VlanId,
        port: int = 22,
        port_map: Mapping[str, str] | None = None,
        known_hosts: str | None = None,
        insecure: bool = False,
        passphrase: Secret | None = None,
        passphrase_file: str | None = None,
        passphrase_env: str | None = None,
        variables: Mapping[str, str] | None = None,
        command_prefix: str | None = None,
        bridge: str | None = None,
        max_sessions: int = 1,
        connect_timeout: float = 10.0,
        command_timeout: float = 120.0,
        retries: int = 4,
        backoff: float = 0.25,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._switch = switch
        if known_hosts:
            if insecure is True:
                raise ConfigError("insecure", True, "false when known_hosts is given (strict host-key checking)")
            if not Path(known_hosts).is_file():
                raise ConfigError("known_hosts", known_hosts, "an existing known_hosts file (OpenSSH format)")
        elif insecure is not True:
            raise ConfigError(
                "known_hosts", None, "a known_hosts file for strict host-key checking (or insecure: true, reported by the audit)"
            )
        self.insecure = insecure is True
        self.dialect = load_dialect(dialect) if isinstance(dialect, str) else dialect
        self.quarantine = check_quarantine_vlan(quarantine_vlan)
        self.port_map = dict(port_map or {})
        for inv, dev in self.port_map.items():
            check_port_name(inv)
            check_port_name(dev, self.dialect.port_naming)  # the switch's own name of the port
        self._reverse = {dev: inv for inv, dev in self.port_map.items()}
        self.variables = {**(variables or {}), **({"vsctl": command_prefix} if command_prefix else {})}
        self.bridge = bridge
        target = SshTarget(
            host=host,
            port=port,
            username=username,
            key_filename=key_filename,
            known_hosts=known_hosts,
            insecure=self.insecure,
            passphrase=load_secret("passphrase", passphrase, passphrase_file, passphrase_env),
            connect_timeout=connect_timeout,
            command_timeout=command_timeout,
            retries=retries,
            backoff=backoff,
        )
        self.connection = SshConnection(target, switch, sleep=sleep)
        self._slot = switch_slot(host, port, max_sessions)
        self._interfaces: frozenset[str] | None = None  # every interface the switch has (last read)
        self._json = bool(self.dialect.json_parser)  # read the `| json` answers (until the switch refuses them)

    @property
    def switch(self) -> str:
        return self._switch

    def transport_notes(self) -> tuple[TransportNote, ...]:
        """What runs below the secure default, as configured (for the audit)."""
        return self.connection.session.host.insecure_notes(self._switch, "insecure", f"SSH to {self._switch}")

    @property
    def connections_opened(self) -> int:
        """SSH connections this driver opened so far (client-side count)."""
        return self.connection.connects

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> SshSwitchDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ helpers
    def _device_port(self, port: str) -> str:
        return self.port_map.get(port, port) if self.port_map else port

    def _to_device(self, c: EthernetPortConfig) -> EthernetPortConfig:
        if c.switch != self._switch:
            raise ValidationError(
                "switch", c.switch, self._switch, f"change for port {c.port} sent to the wrong driver"
            )
        if self.port_map and c.port not in self.port_map:
            raise ValidationError("port", c.port, ", ".join(sorted(self.port_map)), f"not in {self._switch}'s port map")
        return replace(c, port=self._device_port(c.port), bond=self._device_port(c.bond) if c.bond else "")

    def _run(self, lines: Sequence[str]) -> CommandResult:
        if self.dialect.transport == "exec":
            return self.connection.run_exec("\n".join([*self.dialect.script_header, *lines]))
        return self.connection.run_shell(list(lines))

    def _failure(self, result: CommandResult) -> tuple[str, str] | None:
        """(offending command, error text) when ``result`` means the session failed."""
        hits = find_errors(self.dialect, result.output)
        failed = bool(hits) or (self.dialect.transport == "exec" and result.status != 0)
        if not failed:
            return None
        traced = [ln[2:] for ln in result.stderr.splitlines() if ln.startswith("+ ")]  # `set -x` trace
        if traced:
            offending = traced[-1]
        elif len(result.command.splitlines()) <= 1:
            offending = result.command.strip()
        else:
            offending = "\n".join(hits) or result.command  # shell CLIs: the error lines name the token
        detail = "; ".join(hits) or (result.output.strip().splitlines() or [f"exit status {result.status}"])[-1]
        return offending, detail

    def _read_text(self, error: type[FabricError]) -> str:
        if self._json:
            result = self._run(render_json_read(self.dialect, self.variables))
            if self._failure(result) is None and "{" in result.stdout:
                return result.stdout
            self._json = False  # this software version has no `| json` for these commands: read the text
        result = self._run(render_read(self.dialect, self.variables))
        bad = self._failure(result)
        if bad:
            raise error(
                f"reading the configuration of {self._switch} failed: {bad[1]}",
                fabric="ethernet",
                device=self._switch,
                command=bad[0],
                output=result.output[-4000:],
            )
        return result.stdout

    def _parse(self, text: str) -> SwitchState:
        if self._json:
            reading = JSON_READERS[self.dialect.json_parser](text)
            if lists_every_interface(self.dialect):
                self._interfaces = reading.names
            ports = sorted(ports_of(reading, self._switch), key=lambda p: natural_key(p.port))
            return SwitchState(self._switch, tuple(ports))
        if lists_every_interface(self.dialect):
            self._interfaces = interface_names(self.dialect, text)
        return parse_running_config(
            self.dialect, text, switch=self._switch, quarantine=self.quarantine, bridge=self.bridge
        )

    # ------------------------------------------------------------------ driver API
    def observe(self) -> SwitchState:
        with self._slot:
            text = self._read_text(FabricError)
        state = self._parse(text)
        if not self.port_map:
            return state
        ports = tuple(
            replace(p, port=self._reverse[p.port], bond=self._reverse.get(p.bond, p.bond))
            for p in state.ports
            if p.port in self._reverse
        )
        return SwitchState(self._switch, ports)

    def render(self, changes: Sequence[EthernetPortConfig], current: SwitchState | None = None) -> tuple[str, ...]:
        """The commands ``apply`` would send (``current`` in device port names)."""
        dev = [self._to_device(c) for c in changes]
        return render_batch(self.dialect, dev, quarantine=self.quarantine, current=current, variables=self.variables)

    def _check_ports_exist(self, ports: Sequence[str]) -> None:
        """Refuse, before sending anything, a batch naming a port the switch does not have:
        IOS-like CLIs and SONiC apply a batch line by line, so a bad port in the middle would
        leave the lines before it applied (EOS and NX-OS undo such a batch, see ``abort``; the
        check still saves the round trips). Uses the interface list of the last read (re-read
        once on a miss); dialects whose config does not list every interface are not checked."""
        if not lists_every_interface(self.dialect):
            return
        if self._interfaces is None or not set(ports) <= self._interfaces:
            self._parse(self._read_text(ApplyError))
        missing = sorted(set(ports) - (self._interfaces or frozenset()))
        if missing:
            raise ApplyError(
                f"{self.dialect.name} on {self._switch}: no such port(s): {', '.join(missing)} (nothing was sent)",
                fabric="ethernet",
                device=self._switch,
                ports=missing,
            )

    def apply(self, changes: Sequence[EthernetPortConfig]) -> None:
        changes = list(changes)
        if not changes:
            return
        dev = [self._to_device(c) for c in changes]
        with self._slot:
            # NVUE (bond_needs_current): a member going back into its bond leaves its old one first
            needs = self.dialect.needs_current or (self.dialect.options.get("bond_needs_current") and any(c.bond for c in dev))
            current = self._parse(self._read_text(ApplyError)) if needs else None
            self._check_ports_exist([c.port for c in dev])
            staged = bool(self.dialect.lines("commit"))
            var = {**self.variables, "session": f"gpf_{uuid.uuid4().hex[:12]}"} if staged else self.variables
            lines = render_batch(self.dialect, dev, quarantine=self.quarantine, current=current, variables=var)
            if not lines:  # only bond members the dialect cannot put back (render_batch)
                return
            result = self._run(lines)
            bad = self._failure(result)
            if staged:  # the batch waits in a session: commit it, or drop it when a line was refused
                second = self._run(render_lines(self.dialect, "abort" if bad else "commit", var))
                if bad:
                    undone = self._failure(second)
                    note = f"the abort failed too: {undone[1]}" if undone else "the batch was aborted: nothing left applied"
                    bad = (bad[0], f"{bad[1]} ({note})")
                else:
                    bad, result = self._failure(second), second
        if bad:
            raise ApplyError(
                f"{self.dialect.name} on {self._switch}: {bad[1]}",
                fabric="ethernet",
                device=self._switch,
                command=bad[0],
                output=result.output[-4000:],
                status=result.status,
                ports=[c.port for c in changes],
            )
