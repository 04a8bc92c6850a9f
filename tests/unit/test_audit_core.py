"""The audit core is fabric-neutral: it names no fabric, runs each kind's checks through the
seam, and refuses a kind's finding of an invariant the kind did not declare. Also: the
default PKey has one source, and transport notes are named after their backend's fabric."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpufabric.audit import SPLIT_FABRICS_ID, Violation, metrics_samples, registry_for, render_html, run_audit
from gpufabric.domain import values
from gpufabric.domain.errors import ValidationError
from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.severity import Severity
from gpufabric.engine.audit_run import audit
from gpufabric.engine.fabrics import Fabrics
from gpufabric.engine.moves import MoveEngine
from gpufabric.fabrics.ethernet.kind import EthernetKind
from gpufabric.fabrics.infiniband.kind import InfinibandKind
from gpufabric.fabrics.infiniband.state import partitions
from gpufabric.store.core import Store
from gpufabric.store.registry import Registry
from gpufabric.transport.secrets import TransportNote

from support import drivers
from support.memfabric import DRIFT_ID_MEMORY, MemoryKind, register
from unit import test_engine_memory as memory_engine
from unit.audit_scenarios import REGISTRY, T0, Scenario, guid

SRC = Path(__file__).resolve().parents[2] / "src" / "gpufabric"
FABRIC_WORDS = re.compile(r"(?i:ethernet|infiniband|nvlink|\bdpu\b|vlan|pkey|guid|switch)|^(ETH|IB|NVLINK|DPU)-|^Fabric$")


def _code_words(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every name, attribute and string literal of ``path``, but docstrings and
    prose (a string with a space: help text such as an invariant's description may name fabrics)."""
    tree = ast.parse(path.read_text())
    docs = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef)
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            yield n.lineno, n.id
        elif isinstance(n, ast.Attribute):
            yield n.lineno, n.attr
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs and " " not in n.value:
            yield n.lineno, n.value
        elif isinstance(n, ast.alias):
            yield n.lineno, n.name


def test_audit_core_and_its_service_name_no_fabric() -> None:
    files = [*sorted((SRC / "audit").glob("*.py")), SRC / "engine" / "audit_run.py"]
    hits = [f"{f.relative_to(SRC)}:{n}: {w}" for f in files for n, w in _code_words(f) if FABRIC_WORDS.search(w)]
    assert hits == []


def test_default_pkey_has_one_source() -> None:
    assert partitions.DEFAULT_PKEY is values.DEFAULT_PKEY == 0x7FFF
    defined = [str(f.relative_to(SRC)) for f in SRC.rglob("*.py") if re.search(r"^DEFAULT_PKEY\b.*=", f.read_text(), re.M)]
    assert defined == ["domain/values.py"]


def test_registry_is_collected_from_the_kinds() -> None:
    ids = REGISTRY.ids()
    eth, ib = (tuple(s.id for s in k.invariants()) for k in (EthernetKind(), InfinibandKind()))
    assert len(eth) >= 4 and len(ib) >= 7
    assert ids == (*eth, *ib, "X-NODE-SPLIT", "X-DRIFT", "TRANSPORT-INSECURE")
    assert {i.fabric for i in REGISTRY} == {"ethernet", "infiniband", "cross"}
    # a kind without a per-port view brings the tenants_seen-based cross check along
    assert SPLIT_FABRICS_ID not in ids
    assert SPLIT_FABRICS_ID in registry_for([EthernetKind(), InfinibandKind(), MemoryKind()]).ids()
    assert registry_for([]).ids() == ("X-NODE-SPLIT", "X-DRIFT", "TRANSPORT-INSECURE")


class _Liar(EthernetKind):
    def audit(self, tenancy: Tenancy, desired: Any, observed: Any) -> Iterable[Violation]:
        return [Violation("IB-ROGUE-SM", Severity.CRITICAL, "not mine to say")]


def test_a_kinds_finding_of_an_undeclared_invariant_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"ethernet.audit\(\).invariant"):
        run_audit(Scenario().build(), registry=registry_for([_Liar(), InfinibandKind()]))


def test_kinds_alone_audit_their_own_fabric() -> None:
    """Without the InfiniBand kind, a broken PKey table is nobody's business; with it, it is."""
    s = Scenario().set_pkeys(guid("a1", 0), 0x8A02, 0x7FFF)  # an alpha port full in beta's key
    eth_only = run_audit(s.build(), registry=registry_for([EthernetKind()]), now=T0)
    assert not any(v.invariant.startswith("IB-") for v in eth_only.violations)
    both = run_audit(s.build(), registry=REGISTRY, now=T0)
    assert {"IB-GUID-FOREIGN-PKEY", "IB-PKEY-SHARED"} <= {v.invariant for v in both.violations}


def test_a_node_held_in_quarantine_is_audited_as_quarantined() -> None:
    """A move in flight holds a1 in quarantine: its port must be in the quarantine VLAN, as
    the desired state says, whatever its lease (NVLink and DPU already saw it so)."""
    inp = Scenario().build()
    held = replace(inp, held=frozenset({"a1"}))
    assert not run_audit(inp, only=["ETH-UNLEASED-NOT-QUARANTINED"], registry=REGISTRY).violations
    [v] = run_audit(held, only=["ETH-UNLEASED-NOT-QUARANTINED"], registry=REGISTRY).violations
    assert (v.node, v.port, v.resource) == ("a1", "p1", "vlan:2001")


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MoveEngine]:
    """The in-memory engine of tests/unit/test_engine_memory.py (Ethernet, IB, memory fabrics)."""
    reg = Registry.from_entry_points()
    register(reg)
    fabrics = Fabrics.from_config(memory_engine.fabrics_config(), reg)
    store = Store.open(url=f"sqlite:///{tmp_path / 'g.db'}")
    store.upsert_inventory(memory_engine.inventory())
    yield MoveEngine(store, fabrics, memory_engine.CFG, worker="test:1", heartbeat_every=60)
    fabrics.close()
    store.close()


def test_the_sms_transport_notes_are_named_infiniband(engine: MoveEngine) -> None:
    """The SM driver's transport notes (e.g. UFM over http) reach the audit through its
    backend (``InfinibandBackend.transport_notes``), named after the backend's fabric."""
    sm: Any = drivers.sm(engine.fabrics)
    sm.transport_notes = lambda: (TransportNote("ufm", "http", "UFM at http://ufm:80 over plain http"),)
    found = [v for v in audit(engine).violations if v.invariant == "TRANSPORT-INSECURE"]
    assert [(v.fabric, v.device, v.resource) for v in found] == [("infiniband", "ufm", "transport:http")]


def test_metrics_and_html_know_every_kinds_invariant(engine: MoveEngine) -> None:
    """Regression: ``metrics_samples``/``render_html`` looked severities and descriptions up in
    the built-in registry only, so a kind's invariant (NVLink, DPU, the memory fabric) was
    exported as ``severity="low"`` with no description; the report now carries them."""
    report = audit(engine)
    series = {labels["invariant"]: labels["severity"] for name, labels, _ in metrics_samples(report)
              if name == "gpufabric_audit_violations"}  # fmt: skip
    assert series[DRIFT_ID_MEMORY] == "high"
    assert series["IB-ROGUE-SM"] == "critical" and series[SPLIT_FABRICS_ID] == "critical"
    html = render_html(report)
    desc = "A memory-fabric port&#x27;s tag is not the desired one (its node&#x27;s owner and segments)."
    assert f'<tr><td><code>{DRIFT_ID_MEMORY}</code></td><td><span class="sev sev-high">high</span></td><td>{desc}</td>' in html
