"""Moves on the in-memory fabrics, shared by tests and benches (tests/functional/test_worker_takeover.py,
tests/functional/test_backup_under_load.py, bench/bench_takeover.py).

The world is the 3-node one of ``unit/test_engine_memory`` on :mod:`support.memfabric`'s devices
(an Ethernet switch ``leaf1``, a subnet manager, the ``memory`` tags). Here:

* :func:`memory_fabrics` builds its ``Fabrics``, optionally with a fixed latency per device
  ``apply`` (an OVSDB transaction or an SM reload takes time; without it a phase is ~1 ms and
  "mid-move" means little);
* :func:`seed` writes its inventory and the tenants ``ta``/``tb`` with one network each;
* :func:`owner_map` reads who holds each node from the devices themselves (their ``observe``,
  not gpufabric's Fabrics, planner or store), VLANs and P_Keys mapped to tenants with the
  networks read once;
* :func:`two_engines` gives two MoveEngines on one store, each on its own connection pool, with
  worker ids naming two other hosts (so the "dead process on this host" shortcut cannot apply).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text

from gpufabric.domain.models import QUARANTINE
from gpufabric.engine.fabrics import Fabrics
from gpufabric.engine.moves import BatchResult, MoveEngine
from gpufabric.fabrics.ethernet.entries import ethernet_ports
from gpufabric.fabrics.ethernet.segments import segment_vlan
from gpufabric.fabrics.infiniband.entries import all_ib_ports
from gpufabric.fabrics.infiniband.segments import segment_pkey
from gpufabric.store.core import Store
from gpufabric.store.registry import Registry

from support import drivers
from support.memfabric import register
from unit.test_engine_memory import CFG, fabrics_config, inventory

TENANTS = ("ta", "tb")  # each with one network ``<tenant>-net``
Observed = dict[str, Any]  # device role -> its observed state
OwnerOf = Callable[[Observed], dict[str, set[str]]]


def slow_apply(device: Any, delay: float) -> None:
    """Give a device's ``apply`` a fixed latency (before it changes anything)."""
    inner = device.apply

    def apply(*args: Any, **kw: Any) -> Any:
        time.sleep(delay)
        return inner(*args, **kw)

    device.apply = apply


def memory_fabrics(device_delay: float = 0.0) -> Fabrics:
    """The world's Fabrics on fresh memory devices; each device's ``apply`` takes ``device_delay`` s."""
    reg = Registry.from_entry_points()
    register(reg)
    f = Fabrics.from_config(fabrics_config(), reg)
    if device_delay:
        for d in devices(f).values():
            slow_apply(d, device_delay)
    return f


def devices(f: Fabrics) -> dict[str, Any]:
    """The world's devices by role: ``switch``, ``sm``, ``memory``."""
    return {"switch": drivers.switches(f)["leaf1"], "sm": drivers.sm(f), "memory": f.backends["memory"]}


def observe(f: Fabrics) -> Observed:
    """Every device's own state, read now."""
    return {k: d.observe() for k, d in devices(f).items()}


def seed(store: Store, f: Fabrics) -> None:
    """The world's inventory, and the tenants ``ta``/``tb`` with one network each."""
    store.upsert_inventory(inventory())
    for t in TENANTS:
        store.create_tenant(t)
        store.create_network(f"{t}-net", t, CFG, kinds=f.kind_list())


def owner_map(store: Store) -> OwnerOf:
    """A function from the devices' observed states to node -> the tenants (or quarantine) its
    ports hold; the store's networks are read once, here."""
    vlan, pkey = {}, {}
    for net in store.networks():
        for seg in net.segments:
            if segment_vlan(seg) is not None:
                vlan[segment_vlan(seg).value] = net.tenant
            if segment_pkey(seg) is not None:
                pkey[segment_pkey(seg).value & 0x7FFF] = net.tenant
    inv = inventory()
    eth_of = {(p.switch, p.switch_port): n.name for n in inv.nodes for p in ethernet_ports(n)}
    ib_of = {p.port_guid: n.name for n in inv.nodes for p in all_ib_ports(n)}

    def owner_of(raw: Observed) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {n.name: set() for n in inv.nodes}
        for port in raw["switch"].ports:
            if (node := eth_of.get((port.switch, port.port))) is not None:
                ts = {vlan[v.value] for v in (port.vlan, *port.trunks) if v is not None and v.value in vlan}
                out[node].update(ts or {QUARANTINE})
        for table in raw["sm"].tables:
            if (node := ib_of.get(table.port_guid)) is not None:
                out[node].update({pkey[e & 0x7FFF] for e in table.entries if e & 0x7FFF in pkey} or {QUARANTINE})
        for port, tag in raw["memory"].tags:
            out.setdefault(port.split("/")[0], set()).add(tag)
        return out

    return owner_of


@contextmanager
def two_engines(url: str, f: Fabrics, beat: float, suffix: str = "") -> Iterator[tuple[MoveEngine, MoveEngine]]:
    """Two MoveEngines on the store at ``url`` (one connection pool each), workers
    ``host-a<suffix>:4242:serve`` and ``host-b<suffix>:4242:serve``, heartbeating every ``beat`` s."""
    stores = [Store.open(url=url) for _ in range(2)]
    try:
        a, b = (MoveEngine(s, f, CFG, worker=f"host-{w}{suffix}:4242:serve", heartbeat_every=beat)
                for s, w in zip(stores, "ab", strict=True))  # fmt: skip
        yield a, b
    finally:
        for s in stores:
            s.close()


def go_silent(engine: MoveEngine, sessions_end: bool = True) -> None:
    """``engine``'s host goes silent: no heartbeat any more. ``sessions_end``: its fabric lock's
    PostgreSQL session ends too (terminated from another session), as on a ``kill -9`` (the
    kernel closes the process's sockets) or a dead host once PostgreSQL dropped its connection;
    otherwise the session stays, as for a paused VM until TCP keepalive ends it
    (:func:`end_sessions`)."""
    engine.ledger.heartbeat = lambda *_a, **_k: 0  # type: ignore[method-assign]
    if sessions_end:
        end_sessions(engine)


def end_sessions(engine: MoveEngine) -> None:
    """End ``engine``'s fabric-lock PostgreSQL session from another session."""
    pid = engine.ledger.lock.session
    assert pid is not None, "the worker holds no fabric lock"
    with engine.store.tx() as tx:
        tx.session.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})


@dataclass
class FrozenWorker:
    """``engine.run_pending()`` in a thread, frozen (its host silent, :func:`go_silent`) just
    before its first apply in one phase; ``died_at``: ``time.monotonic()`` at the freeze."""

    wake: threading.Event = field(default_factory=threading.Event)
    frozen: threading.Event = field(default_factory=threading.Event)
    died_at: float = 0.0
    result: list[BatchResult | None] = field(default_factory=list)
    thread: threading.Thread | None = None

    def resume(self) -> BatchResult | None:
        """Wake the frozen worker and wait for its batch's result."""
        assert self.thread is not None
        self.wake.set()
        self.thread.join(30)
        assert not self.thread.is_alive()
        return self.result[0]


def freeze_before_apply(
    engine: MoveEngine, phase: str, message: str = ": applying", sessions_end: bool = True
) -> FrozenWorker:
    """Start ``engine``'s worker tick; it freezes at the first progress line of ``phase``
    containing ``message`` (before that apply is sent; :func:`go_silent` with ``sessions_end``).
    Returns once it is frozen."""
    w = FrozenWorker()

    def freeze(label: str, line: str) -> None:
        if w.frozen.is_set() or label != phase or message not in line:
            return
        go_silent(engine, sessions_end)
        w.died_at = time.monotonic()
        w.frozen.set()
        w.wake.wait(60)

    engine.progress = freeze
    w.thread = threading.Thread(target=lambda: w.result.append(engine.run_pending()), daemon=True)
    w.thread.start()
    assert w.frozen.wait(30), f"the worker never reached its {phase} apply"
    return w
