"""Contract targets without root: the in-memory switch, and :class:`SshSwitchDriver` in each of
the seven dialects replayed against the vendor-CLI doubles (tests/support/ssh_double: doubles of
the vendors' CLIs, not the vendors)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from gpufabric.fabrics.ethernet.drivers.ssh.dialects import DIALECTS

from fabrics.ethernet.contract.ethernet_targets import MIN_PORTS, QUARANTINE_VLAN, EthernetTarget
from support.memfabric import MemorySwitchDriver
from support.ssh_double import AGGREGATE, double_driver, port_names


@contextmanager
def memory_target(_run_dir: Path) -> Iterator[EthernetTarget]:
    ports = tuple(f"m{i:02d}" for i in range(MIN_PORTS))
    yield EthernetTarget(MemorySwitchDriver("mem-leaf", ports, QUARANTINE_VLAN), ports)


def ssh_double_target(dialect: str) -> Callable[[Path], AbstractContextManager[EthernetTarget]]:
    @contextmanager
    def target(_run_dir: Path) -> Iterator[EthernetTarget]:
        ports = port_names(dialect, MIN_PORTS)
        drv, _ = double_driver(dialect, f"{dialect}-leaf", (*ports, AGGREGATE[dialect]), QUARANTINE_VLAN.value)
        yield EthernetTarget(drv, ports, KNOWN_GAPS.get(dialect, {}), (AGGREGATE[dialect],))

    return target


DOUBLE_DIALECTS = DIALECTS

TAKES_ANY_NAME = (
    "the {} double takes a well-formed name of a port it does not have (whether a real switch refuses it is not "
    "modelled) and a malformed one never reaches it (the renderer refuses it: issue 31), so no port name makes it fail"
)
KNOWN_GAPS: dict[str, dict[str, str]] = {
    "junos": {
        "test_unknown_port_fails_and_changes_nothing": (
            "a non-interactive Junos CLI commits the lines that did not fail (see dialects/junos.yaml), and its "
            "config lists only configured interfaces, so the driver cannot refuse an unknown port up front"
        ),
        "test_driver_errors_are_fabric_errors": TAKES_ANY_NAME.format("Junos"),
    },
    "nvue": {
        "test_unknown_port_fails_and_changes_nothing": TAKES_ANY_NAME.format("NVUE")
        + "; its config lists only configured interfaces, so the driver cannot refuse an unknown port up front",
        "test_driver_errors_are_fabric_errors": TAKES_ANY_NAME.format("NVUE"),
    },
}
