"""A fabric refusing a batch before its quarantine (``FabricBackend.before_move``: the DPU gates,
the OpenShift drain), over the in-memory fabrics read back after each run: the moves not yet
started are cancelled with the refusal, their nodes stay with their tenants on every fabric and
leave ``moving``; moves of the same batch already past quarantine go on."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from gpufabric.domain.errors import ApplyError, ConflictError
from gpufabric.domain.fabric import Tenancy
from gpufabric.domain.moves import Move, MovePhase, MoveRequest, MoveStatus
from gpufabric.engine.moves import MoveEngine
from gpufabric.planning.plan import plan

from unit.test_engine_memory import engine, mem, move, owners

__all__ = ["engine"]  # the fixture


def refuse_node(e: MoveEngine, node: str, seen: list[tuple[str, str]]) -> None:
    def before_move(tenancy: Tenancy, moves: Sequence[Move]) -> None:
        seen.extend((m.node, tenancy.owner(m.node)) for m in moves)
        if any(m.node == node for m in moves):
            raise ConflictError(f"{node}: DPU is in separated mode; offering openshift needs dpu mode", node=node)

    mem(e).before_move = before_move  # type: ignore[method-assign]


def test_a_refusal_cancels_the_batch_before_any_fabric_change(engine: MoveEngine) -> None:
    move(engine, "n1", "ta")
    seen: list[tuple[str, str]] = []
    refuse_node(engine, "n1", seen)
    before = engine.fabrics.observe()
    m = engine.ledger.request("n1", MoveRequest("tb", networks=("tb-net",)))
    with pytest.raises(ConflictError, match="n1: DPU is in separated mode"):
        engine.run_pending()
    assert seen == [("n1", "ta")]  # asked with the owners before the move
    got = engine.ledger.get(m.id or 0)
    assert (got.status, got.phase) == (MoveStatus.CANCELLED, MovePhase.QUARANTINE)
    assert got.error == "n1: DPU is in separated mode; offering openshift needs dpu mode"
    assert engine.fabrics.observe() == before and owners(engine)["n1"] == {"ta"}
    assert engine.store.node("n1").state.value == "leased"
    assert plan(engine.kinds, engine.desired(), engine.fabrics.observe()).empty  # nothing holds n1 in quarantine


def test_a_refusal_spares_moves_already_past_quarantine(engine: MoveEngine) -> None:
    mem(engine).faults.arm(ApplyError("injected memory failure", fabric="memory", device="x"),  # type: ignore[attr-defined]
                           when=lambda p: any(c.after == "tb" for c in p.changes))  # type: ignore[attr-defined]  # fmt: skip
    a = engine.ledger.request("n2", MoveRequest("tb", networks=("tb-net",)))
    with pytest.raises(ApplyError):
        engine.run_pending()  # n2 failed at join
    engine.ledger.retry(a.id or 0)
    seen: list[tuple[str, str]] = []
    refuse_node(engine, "n1", seen)
    b = engine.ledger.request("n1", MoveRequest("tb", networks=("tb-net",)))
    batch = engine.run_pending()  # one batch: n2 resumes at join, n1 is refused
    assert batch is not None
    assert {m.node: m.status for m in batch.moves} == {"n1": MoveStatus.CANCELLED, "n2": MoveStatus.DONE}
    assert [n for n, _ in seen] == ["n1"]  # only the move not yet started was asked
    assert engine.ledger.get(b.id or 0).status is MoveStatus.CANCELLED
    assert owners(engine)["n2"] == {"tb"} and owners(engine)["n1"] != {"tb"}
    assert engine.store.node("n1").state.value == "available"


def test_a_batch_reads_the_owners_for_the_fabrics_hooks_only_when_a_fabric_has_one(engine: MoveEngine) -> None:
    """``before_move``/``after_join`` get the owners (a read of the store); when no fabric overrides
    them (the default does nothing), the move does not read the store for them."""
    reads: list[int] = []
    real = engine.tenancy

    def counted() -> Tenancy:
        reads.append(1)
        return real()

    engine.tenancy = counted  # type: ignore[method-assign]
    move(engine, "n1", "ta")
    assert reads == []
    seen: list[tuple[str, str]] = []
    refuse_node(engine, "nobody", seen)  # a before_move hook that refuses nothing
    move(engine, "n1", "tb")
    assert reads == [1] and seen == [("n1", "ta")]  # once, with the owners before the move
