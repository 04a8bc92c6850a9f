"""What a restore does once the rows are in: the restored store's live tokens listed and revoked
(unless kept) and the ``store.restore`` event recording who restored which file (its sha256)."""

from __future__ import annotations

import getpass
import hashlib
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from gpufabric.domain.auth import LOCAL_ADMIN, Principal, Role

if TYPE_CHECKING:
    from gpufabric.store.core import Store


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def operator() -> Principal:
    """Who restores: the local operator, with the OS user that ran the command."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return Principal(f"{LOCAL_ADMIN.name}:{user}"[:63], Role.ADMIN)


def review(store: Store, path: Path, facts: str, keep_tokens: bool) -> tuple[Mapping[str, Any], ...]:
    """The restored store's live tokens (not revoked, not expired), revoked unless ``keep_tokens``,
    and the ``store.restore`` event: one transaction."""
    from gpufabric.store.auth import EventLog
    from gpufabric.store.tables import TokenRow

    now = datetime.now(UTC)
    with store.tx() as tx:
        s = tx.session
        rows = [r for r in s.scalars(select(TokenRow).where(TokenRow.revoked_at.is_(None)).order_by(TokenRow.id))
                if r.expires_at is None or r.expires_at > now]  # fmt: skip
        out = tuple({"id": r.id, "name": r.name, "role": r.role, "tenant": r.tenant, "created_by": r.created_by,
                     "expires_at": r.expires_at.isoformat() if r.expires_at else None, "kept": keep_tokens}
                    for r in rows)  # fmt: skip
        if not keep_tokens:
            for r in rows:
                r.revoked_at = now
        ids = ", ".join(str(r.id) for r in rows) or "none"
        msg = f"restored from {path} ({facts}); {'kept' if keep_tokens else 'revoked'} token(s) {ids}"
        s.add(EventLog.row(operator(), "store.restore", str(path), True, msg, None))
    return out
