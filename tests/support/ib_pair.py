"""An ibsim fabric of ``hosts`` HCAs with its master OpenSM (on the SM node) and the lab's
standby (:class:`gpufabric.lab.smpair.SmPair`), for the SM-host tests; stopped on exit."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpufabric.lab.ib import IbFabric
from gpufabric.lab.netfile import SM_NODE, generate_netfile
from gpufabric.lab.smpair import SmPair, with_standby_node


@contextmanager
def sm_pair_lab(root: Path, prefix: str, hosts: int = 4) -> Iterator[tuple[IbFabric, SmPair]]:
    fab = IbFabric(root / "ib", prefix, SM_NODE)
    pair = SmPair(fab, root / "pair")
    try:
        fab.start_ibsim(with_standby_node(generate_netfile(hosts, 1)))
        fab.start_opensm()
        pair.start()
        yield fab, pair
    finally:
        pair.stop()
        fab.stop()
