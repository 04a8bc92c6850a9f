"""Alembic run on a store URL for a test: ``alembic(url, "upgrade" | "downgrade", revision)``."""

from __future__ import annotations

from alembic import command

from gpufabric.store import db


def alembic(url: str, action: str, revision: str) -> None:
    """``alembic <action> <revision>`` on the store at ``url``, in one transaction."""
    engine = db.make_engine(url)
    try:
        with engine.begin() as conn:
            cfg = db._config()
            cfg.attributes["connection"] = conn
            getattr(command, action)(cfg, revision)
    finally:
        engine.dispose()
