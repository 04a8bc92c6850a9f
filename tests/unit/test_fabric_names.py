"""The core never names a fabric (issue 19): a ratchet over the names of the built-in fabrics
outside ``fabrics/<kind>/`` and ``lab/``.

Counted per module: identifiers naming a fabric (``ethernet``, ``InfiniBand``, ``Node.ib``,
``dpus``, ``eth_vlans``, ...) and string literals that are exactly a fabric's name
(``"dpu"``). Comments and prose are not counted. ``DEBT`` is what the core still names today
(the typed ``Node``/``FabricState`` fields and tables of the four built-in kinds, their API/CLI
views, the lab command): a module may only go down; a module not listed may name none. When you
remove a name, lower its count here (the test tells you by how much).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "gpufabric"
KINDS = ("ethernet", "infiniband", "nvlink", "dpu")
NAME = re.compile(r"(?i)^(ethernet|infiniband|nvlink|dpu)$|(^|_)(eth|ib|dpu|dpus|gpus|nvlink|ethernet|infiniband)(_|$)")
EXEMPT = ("fabrics", "lab")  # a fabric's own folder; the lab models a site with every fabric

DEBT: dict[str, int] = {
    "cli/lab_cmd.py": 23,  # the lab's own command (lab/ is exempt); +1: up(ib_subnets=) of the two-subnet lab, passed twice; -1: the lab reads its VLANs from config.yaml itself (lab.netns.lab_vlans)
    "cli/lease_cmd.py": 2,  # --gpus: the CLI's spelling of the NVLink kind's lease term, a declared exception (its docstring)
    "cli/node_cmd.py": 2,  # node move --gpus: the same declared exception as lease create --gpus
    "store/migrations/versions/0012_dpu_generic_ports.py": 1,  # the record of moving the DPU kind's table into the generic one
    "store/migrations/versions/0013_nvlink_generic_ports.py": 1,  # the same for the NVLink kind's GPUs
    "store/migrations/versions/0015_ports_one_table.py": 35,  # the same for the Ethernet and InfiniBand kinds' ports (frozen)
}


def names_a_fabric(text: str) -> int:
    n = 0
    for t in tokenize.generate_tokens(io.StringIO(text).readline):
        if (t.type == tokenize.NAME and NAME.search(t.string)) or (t.type == tokenize.STRING and t.string.strip("\"'") in KINDS):
            n += 1
    return n


def test_the_core_names_no_more_fabrics_than_its_listed_debt() -> None:
    grown, lower = [], []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if rel.parts[0] in EXEMPT:
            continue
        n, allowed = names_a_fabric(path.read_text()), DEBT.get(str(rel), 0)
        if n > allowed:
            grown.append(f"{rel}: names a fabric {n} times (allowed {allowed}): go through the kind (FabricKind)")
        elif n < allowed:
            lower.append(f"{rel}: {allowed} -> {n}")
    assert not grown, "\n".join(grown)
    assert not lower, "debt paid, lower DEBT: " + "; ".join(lower)


def test_the_count_sees_a_fabric_name() -> None:
    """The ratchet can fail: a new core line naming a fabric is counted."""
    assert names_a_fabric('b = engine.fabrics.backends.get("dpu")\nfor p in node.ethernet: pass\n') == 2
    assert names_a_fabric("# the ethernet fabric\nx = 1\n") == 0  # prose is not code


# ---- imports: the core reaches a fabric package only through the registry (entry points)
CORE = ("cli", "api", "web", "engine", "store", "workflow", "runtime")
"""The packages that may never import ``gpufabric.fabrics.*`` (a kind's own commands and routes
come through ``FabricKind.cli_group``/``api_router``: cli/kinds.py, api/v1/kinds.py)."""
IMPORTS_DEBT: dict[str, str] = {}
"""The only core modules that still import a fabric package, each with why; none may be added.
``cli/offload_cmd.py`` and ``api/v1/ops.py`` left this list with ``offload`` (fabrics/dpu/views/cli.py,
api_view.py); ``cli/dpu_facts.py`` with ``FabricKind.power_cycled`` (cli/power_cycle.py) and
``cli/inventory_cmd.py`` with ``FabricKind.import_formats``/``port_namings`` (cli/import_formats.py)."""
NEVER = ("cli/offload_cmd.py", "api/v1/ops.py", "cli/dpu_facts.py", "cli/inventory_cmd.py", "cli/node_cmd.py")
"""Emptied by issue 19: may never import a fabric again."""


def fabric_imports(text: str) -> list[str]:
    """The ``gpufabric.fabrics.*`` modules ``text`` imports (at any depth, also
    ``import_module("gpufabric.fabrics....")``); the registry's entry-point group name is no import."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and (
            getattr(node.func, "id", getattr(node.func, "attr", "")) in ("import_module", "__import__")
        ):
            names = [str(node.args[0].value)]
        else:
            continue
        found += [n for n in names if n == "gpufabric.fabrics" or n.startswith("gpufabric.fabrics.")][:1]
    return found


def core_modules() -> list[Path]:
    return sorted(p for pkg in CORE if (SRC / pkg).is_dir() for p in (SRC / pkg).rglob("*.py"))


def test_no_core_module_imports_a_fabric_package_but_its_listed_debt() -> None:
    found = {str(p.relative_to(SRC)): fabric_imports(p.read_text()) for p in core_modules()}
    new = {m: f for m, f in found.items() if f and m not in IMPORTS_DEBT}
    assert not new, f"core modules import fabric packages (go through FabricKind and the registry): {new}"
    paid = [m for m in IMPORTS_DEBT if not found.get(m)]
    assert not paid, f"debt paid, remove from IMPORTS_DEBT: {paid}"


@pytest.mark.parametrize("module", NEVER)
def test_the_kind_views_and_hooks_left_the_core(module: str) -> None:
    """The core modules that imported a fabric package (``offload``, ``node power-cycled``,
    ``inventory import --format ibnetdiscover``) never import one again (a module that is gone
    stays gone or comes back clean)."""
    assert module not in IMPORTS_DEBT
    path = SRC / module
    assert not path.exists() or fabric_imports(path.read_text()) == []


def test_the_import_check_sees_every_form() -> None:
    """The import test can fail: each way of importing a fabric package is seen."""
    text = (
        "from gpufabric.fabrics.dpu.backend.offload import site_report\n"
        "import gpufabric.fabrics.nvlink.drivers.fmpm.driver\n"
        "def f():\n    from gpufabric.fabrics import ethernet\n    return import_module('gpufabric.fabrics.dpu.drivers.ovn.northbound')\n"
        "from gpufabric.domain.fabric import FabricKind\nGROUP = 'gpufabric.fabrics'\n"
    )
    assert fabric_imports(text) == ["gpufabric.fabrics.dpu.backend.offload", "gpufabric.fabrics.nvlink.drivers.fmpm.driver",
                                    "gpufabric.fabrics", "gpufabric.fabrics.dpu.drivers.ovn.northbound"]
    assert fabric_imports(Path(__file__).read_text().split("# ---- imports")[0]) == []
