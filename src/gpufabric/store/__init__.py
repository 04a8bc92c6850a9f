"""The store: persistence of the domain behind one unit of work (``with store.tx() as tx:``).

Only the modules of this package touch a SQLAlchemy session (tests/unit/test_architecture.py)."""
