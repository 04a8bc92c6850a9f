"""The Ethernet kind's drivers: the contract (:mod:`.base`) and one folder per driver (ovsdb, ssh)."""
