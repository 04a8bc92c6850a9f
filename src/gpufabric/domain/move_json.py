"""The one JSON shape of a move and of a run of moves, shared by the API (``GET /moves/{id}``)
and every CLI ``--json`` that runs moves (``node move``, ``lease create|delete``, ``move
retry|resume``), whether the CLI ran them itself or a server's worker did (``--api``).

* a move: the API's ``MoveOut`` row (id, node, from_tenant, to_tenant, offering, networks,
  phase, status, attempts, error, created_at, updated_at, claimed_by) with its ``events`` and
  ``timings`` (phase -> seconds);
* a run: ``{"moves": [move, ...], "phases": [{phase, seconds, changes, devices,
  observed_first}], "total_seconds": s, "plans": {phase: plan}}``. Who ran the moves decides
  only what is known: a run seen through the API has no per-device times, change counts or
  plans (``changes``/``observed_first`` are null, ``devices`` and ``plans`` empty).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gpufabric.domain.lease_terms import terms_json

if TYPE_CHECKING:
    from gpufabric.domain.models import Lease
    from gpufabric.domain.moves import Move

RUN_KEYS = ("moves", "phases", "total_seconds", "plans")
PHASE_KEYS = ("phase", "seconds", "changes", "devices", "observed_first")


FINISHED = ("done", "failed", "cancelled")
"""Statuses a move's event stream ends with (an offer stays open until it is answered)."""
OPEN = ("pending", "running", "failed", "offered")
"""Statuses of a move still open: waiting, running, stopped to be retried, or an offer (``move list --open``)."""


def move_out(m: Move) -> dict[str, Any]:
    """A move as the API's ``MoveOut`` row, straight from the workflow's answer (visible to its
    requester before the node is its tenant's; the times are the store's: null here)."""
    return {
        "id": m.id, "node": m.node, "from_tenant": m.from_tenant, "to_tenant": m.to_tenant, "offering": m.offering,
        "networks": list(m.networks), "phase": m.phase.value, "status": m.status.value, "attempts": m.attempts,
        "error": m.error, "created_at": None, "updated_at": None, "claimed_by": m.claimed_by,
    }  # fmt: skip


def lease_out(lease: Lease, now: datetime, terms: Iterable[str] = ()) -> dict[str, Any]:
    """A lease as the API's lease rows show it (``GET /leases``), ``active`` at ``now``, with
    every declared term of ``terms`` (names; the registered kinds') beside its own fields."""
    return {
        "id": lease.id, "tenant": lease.tenant, "node": lease.node, "start": lease.start.astimezone(UTC).isoformat(),
        "end": lease.end.astimezone(UTC).isoformat() if lease.end else None, "networks": sorted(lease.networks),
        "offering": lease.offering, "owner": lease.owner, **terms_json(lease.terms, terms), "active": lease.active_at(now),
    }  # fmt: skip


def move_detail(row: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A move row (``MoveOut``) with its progress events and its per-phase timings."""
    timings = {str(e["phase"]): float(e["seconds"]) for e in events if e.get("seconds") is not None}
    return {**row, "events": [dict(e) for e in events], "timings": timings}


def phase_row(phase: str, seconds: float, changes: int | None = None, devices: Mapping[str, float] | None = None,
              observed_first: bool | None = None) -> dict[str, Any]:  # fmt: skip
    return {"phase": phase, "seconds": round(seconds, 4), "changes": changes,
            "devices": {k: round(v, 4) for k, v in (devices or {}).items()}, "observed_first": observed_first}  # fmt: skip


def run_json(
    moves: Sequence[Mapping[str, Any]],
    phases: Sequence[Mapping[str, Any]] | None = None,
    plans: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A run of moves. Without ``phases`` (a run watched from outside: the API, another
    worker) they are the first move's timings (a batch shares its phases)."""
    if phases is None:
        timings: Mapping[str, float] = moves[0]["timings"] if moves else {}
        phases = [phase_row(k, v) for k, v in timings.items()]
    rows: list[dict[str, Any]] = [{**{k: p.get(k) for k in PHASE_KEYS}, "devices": dict(p.get("devices") or {})}
                                  for p in phases]  # fmt: skip
    total = sum(float(p["seconds"] or 0.0) for p in rows)
    return {"moves": [dict(m) for m in moves], "phases": rows, "total_seconds": round(total, 4),
            "plans": dict(plans or {})}  # fmt: skip
