"""A fabric kind's own inventory import format and its reaction to a node's power cycle
(``FabricKind.import_formats`` / ``power_cycled``, :mod:`gpufabric.domain.hooks`) are reached
through the core CLI from the registry alone: a toy kind registered in this test (no entry
point, no core file naming it) adds ``inventory import --format memtext`` and answers
``node power-cycled``; the built-in formats' entry points agree with their kinds, and listing
the formats (``inventory import --help``) loads no kind."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpufabric.cli.main import build_app
from gpufabric.domain.errors import ConflictError, GpufabricError, NotFoundError, ValidationError
from gpufabric.domain.hooks import ImportEntry, ImportFormat, ImportReport, ImportRequest, PowerCycled
from gpufabric.domain.models import FabricPorts, Inventory, Node, NodeState
from gpufabric.domain.views import FabricAccess
from gpufabric.store.registry import Registry

from support.memfabric import MemoryKind, register
from support.memfabric.kind import _SHARED

SPARE = "is a memory spare: in maintenance, never leasable"


def read_memtext(req: ImportRequest) -> ImportReport:
    """``NODE PORT LINK [spare]`` per line onto the memory instance ``--fabric`` (default: the only one)."""
    instance = req.instance or next(iter(req.instances), "memory")
    if instance not in req.instances:
        raise ValidationError("--fabric", instance, f"a memory instance: {', '.join(req.instances)}")
    entries, ports, held = [], {}, {}
    for i, line in enumerate(req.text.splitlines(), 1):
        words = line.split()
        label = f"line {i} {line!r}"
        if len(words) not in (3, 4) or not words[2].isdigit():
            entries.append(ImportEntry(label, {"line": i, "status": "skipped"}, skip="not-a-port", reason="not NODE PORT LINK"))
            continue
        node, port, link = words[0], words[1], int(words[2])
        ports.setdefault(node, []).append({"name": port, "link": link})
        if words[3:] == ["spare"]:
            held[node] = SPARE
        entries.append(ImportEntry(label, {"line": i, "status": "matched", "node": node}, node, 1))
    skipped = [e for e in entries if not e.matched]
    if req.strict and skipped:
        raise ValidationError("memtext", skipped[0].label, "NODE PORT LINK [spare] on every line")
    known = {n.name: n for n in req.known()}
    nodes = []
    for name, found in sorted(ports.items()):
        fp = (FabricPorts.of(instance, found),)
        node = dataclasses.replace(known[name], fabric_ports=fp) if name in known else Node(name, fabric_ports=fp)
        nodes.append(dataclasses.replace(node, state=NodeState.MAINTENANCE) if name in held else node)
    lines = (f"lines: matched {len(entries) - len(skipped)}, skipped {len(skipped)}",
             *(f"skipped {e.label}: {e.reason}" for e in skipped))  # fmt: skip
    return ImportReport(Inventory(tuple(nodes)), tuple(entries), held, lines, {"lines": [e.doc for e in entries]})


class ToyKind(MemoryKind):
    """The in-memory kind, with an import format and a power-cycle reaction of its own."""

    power_cycle_needs = "a node with memory ports"

    def import_formats(self) -> Sequence[ImportFormat]:
        return (ImportFormat("memtext", read_memtext),)

    def power_cycled(self, node: Node, fabrics: FabricAccess) -> PowerCycled | None:
        ports = [f"{node.name}/{p.name}" for p in self.ports(node)]
        if not ports:
            return None
        backend = fabrics.backend(self.instance)
        assert backend is not None
        tags = {p: backend.observe().by_port.get(p, "unset") for p in ports}
        if "pending" in tags.values():
            raise ConflictError(f"{node.name}: a memory port still reports a pending change", node=node.name)
        return PowerCycled(f"{len(ports)} memory ports read again", {"node": node.name, "tags": tags})


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    shared = f"hooks-{tmp_path.name}"
    fabrics = {"fabrics": [{"name": "memory", "kind": "memory", "driver": "mem-tags", "options": {"shared": shared}}]}
    (tmp_path / "fabrics.yaml").write_text(yaml.safe_dump(fabrics))
    (tmp_path / "ports.memtext").write_text("n1 m0 1\nn1 m1 2\nbogus\nn2 m0 3 spare\n")
    (tmp_path / "plain.yaml").write_text(yaml.safe_dump({"version": 1, "nodes": [{"name": "n3"}]}))
    plain = Registry.from_entry_points

    def with_toy(*a: Any, **k: Any) -> Registry:
        reg = plain(*a, **k)
        register(reg, inventory=True)  # the memory drivers
        reg.register_kind(ToyKind(inventory=True))  # the one registration
        return reg

    monkeypatch.setattr(Registry, "from_entry_points", staticmethod(with_toy))
    monkeypatch.setenv("GPUFABRIC_HOME", str(tmp_path))
    monkeypatch.setenv("GPUFABRIC_DB", "")
    yield tmp_path
    _SHARED.pop(shared, None)


def gf(*args: str) -> str:
    """The output of ``gpufabric ARGS`` run in-process (a GpufabricError is raised as is)."""
    r = CliRunner().invoke(build_app(args[0]), list(args))
    if isinstance(r.exception, GpufabricError):
        raise r.exception
    assert r.exit_code == 0, r.output
    return r.output


def test_a_kind_import_format_is_reached_through_the_core_command(home: Path) -> None:
    doc = json.loads(gf("inventory", "import", str(home / "ports.memtext"), "--format", "memtext", "--json"))
    assert (doc["format"], doc["nodes"], doc["result"]["added"], doc["sm_hosts"]) == ("memtext", 2, 2, ["n2"])
    assert [(x["line"], x["status"]) for x in doc["lines"]] == [(1, "matched"), (2, "matched"), (3, "skipped"), (4, "matched")]
    rows = {r["name"]: r for r in json.loads(gf("node", "list", "--json"))}
    assert rows["n1"]["fabrics"]["memory"]["summary"] == "m0:1 m1:2" and rows["n2"]["state"] == "maintenance"

    out = gf("inventory", "import", str(home / "ports.memtext"), "--format", "memtext").splitlines()
    assert out[:2] == ["lines: matched 3, skipped 1", "skipped line 3 'bogus': not NODE PORT LINK"] and out[-1] == f"n2 {SPARE}"
    imported = f"imported 2 nodes from {home / 'ports.memtext'} (memtext): 0 added, 0 updated, 2 unchanged"
    assert " ".join(" ".join(out[2:-1]).split()) == imported  # (the console wraps it at 80 columns)
    with pytest.raises(ValidationError) as e:
        gf("inventory", "import", str(home / "ports.memtext"), "--format", "memtext", "--strict")
    assert e.value.field == "memtext" and "line 3" in str(e.value)
    with pytest.raises(ValidationError) as e:
        gf("inventory", "import", str(home / "ports.memtext"), "--format", "memtext", "--fabric", "mem-x")
    assert e.value.field == "--fabric" and "a memory instance: memory" in str(e.value)
    r = CliRunner().invoke(build_app("inventory"), ["inventory", "import", str(home / "ports.memtext"), "--format", "nope"])
    said = " ".join(r.output.replace("│", " ").split())  # (the error box, wrapped)
    assert r.exit_code == 2 and "'nope' is not one of 'yaml', 'json', 'ibnetdiscover', 'nvidia-smi', 'nvidia-smi-topo'." in said, said  # the listed ones


def test_a_kind_reacts_to_a_power_cycle_through_the_core_command(home: Path) -> None:
    gf("inventory", "import", str(home / "ports.memtext"), "--format", "memtext")
    gf("inventory", "import", str(home / "plain.yaml"))
    assert gf("node", "power-cycled", "n1") == "node n1: 2 memory ports read again\n"
    doc = json.loads(gf("node", "power-cycled", "n1", "--json"))
    assert doc == {"node": "n1", "tags": {"n1/m0": "unset", "n1/m1": "unset"}}
    _SHARED[f"hooks-{home.name}"]["n1/m1"] = "pending"
    with pytest.raises(ConflictError) as c:
        gf("node", "power-cycled", "n1")
    assert "n1: a memory port still reports a pending change" in str(c.value)
    with pytest.raises(NotFoundError):
        gf("node", "power-cycled", "n9")
    with pytest.raises(ValidationError) as v:  # n3 has neither memory ports nor a DPU: every reacting kind says what it needs
        gf("node", "power-cycled", "n3")
    assert v.value.field == "node" and v.value.allowed == "a node with a DPU in the inventory or a node with memory ports"


def test_the_import_format_entry_points_name_their_kinds_formats() -> None:
    """Every ``gpufabric.import_formats`` entry point gives the format its kind registers (the
    index ``--help`` lists is not a second source); an entry point left out would go unlisted."""
    from importlib.metadata import entry_points

    from gpufabric.cli import import_formats

    indexed = {ep.name: ep.load()() for ep in entry_points(group=import_formats.GROUP)}
    kinds = {f.name: f for k in Registry.from_entry_points(drivers=False).kinds.values() for f in k.import_formats()}
    assert {n: (f.read, f.fallback) for n, f in indexed.items()} == {n: (f.read, f.fallback) for n, f in kinds.items()}
    assert ("yaml", "json", *sorted(kinds)) == import_formats.NAMES and "ibnetdiscover" in kinds


def test_listing_and_finding_a_format_loads_one_kind_at_most() -> None:
    """``inventory import --help`` imports no fabric package and no SQLAlchemy; a file of the
    fallback format loads that kind's package alone. Fails on a stale install: ``pip install -e .``."""
    code = (
        "import sys; from pathlib import Path; from gpufabric.cli.main import build_app; build_app('inventory'); "
        "f = lambda: sorted({m.split('.')[2] for m in sys.modules if m.startswith('gpufabric.fabrics.')}); a = f(); "
        "from gpufabric.cli.import_formats import resolve; name, fmt = resolve(Path('x.topo'), None); "
        "print(a, f(), name, 'sqlalchemy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["[]", "['infiniband']", "ibnetdiscover", "False"], out
