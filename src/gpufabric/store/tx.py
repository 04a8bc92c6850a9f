"""The store's unit of work: what ``with store.tx() as tx:`` yields.

One :class:`Tx` is one database transaction, committed when the ``with`` block ends and rolled
back when it raises. Code outside the store composes its work by passing ``tx`` to the store's
functions (``request_in(tx, ...)``, ``record_in(tx, ...)``, ``usage(tx, ...)``); only the store's
own modules run queries, on :attr:`Tx.session`. No callback runs caller code inside a callee's
transaction: the caller opens the transaction and calls each step in it, in order.
"""

from __future__ import annotations

from sqlalchemy.orm import Session


class Tx:
    """One open transaction on the store (see the module docstring)."""

    __slots__ = ("session",)

    def __init__(self, session: Session) -> None:
        self.session = session  # for the store's modules only (an architecture test checks it)

    def flush(self) -> None:
        """Write what is pending now (ids assigned, constraints checked) without committing."""
        self.session.flush()
