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

import io
import re
import tokenize
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "gpufabric"
KINDS = ("ethernet", "infiniband", "nvlink", "dpu")
NAME = re.compile(r"(?i)^(ethernet|infiniband|nvlink|dpu)$|(^|_)(eth|ib|dpu|dpus|gpus|nvlink|ethernet|infiniband)(_|$)")
EXEMPT = ("fabrics", "lab")  # a fabric's own folder; the lab models a site with every fabric

DEBT: dict[str, int] = {
    "api/v1/leases.py": 2,
    "api/v1/moves.py": 4,
    "api/v1/nodes.py": 4,
    "api/v1/ops.py": 2,
    "api/v1/schemas.py": 17,
    "cli/dpu_facts.py": 5,
    "cli/inventory_cmd.py": 18,
    "cli/lab_cmd.py": 24,
    "cli/lease_cmd.py": 7,
    "cli/move_cmd.py": 7,
    "cli/node_cmd.py": 10,
    "cli/offload_cmd.py": 14,
    "cli/tenant_cmd.py": 9,
    "domain/drivers.py": 2,
    "domain/models.py": 24,
    "domain/moves.py": 2,  # MoveRequest.gpus (the move-request value object; Move.gpus beside it)
    "domain/segments.py": 23,
    "domain/state.py": 8,
    "engine/columns.py": 2,
    "engine/fabrics.py": 1,
    "engine/isolation.py": 2,
    "engine/moves.py": 3,
    "store/convert.py": 47,
    "store/core.py": 25,
    "store/leases.py": 9,
    "store/move_requests.py": 13,
    "store/moves.py": 2,
    "store/nodes.py": 24,
    "store/queries.py": 19,
    "store/registry.py": 2,
    "store/tables.py": 8,
    "store/tenants.py": 27,
    "workflow/actions.py": 7,
    "workflow/inventory.py": 29,
    "workflow/tenancy.py": 8,
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
