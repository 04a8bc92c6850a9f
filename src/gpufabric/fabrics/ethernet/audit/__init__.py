"""The Ethernet kind's audit invariants (pure): isolation on the observed ports (isolation.py) and
what only a bond can get wrong (bonds.py)."""
