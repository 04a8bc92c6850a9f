"""The InfiniBand kind's subnet-manager drivers: the contract (:mod:`.base`) and one folder per driver
(:mod:`.opensm`, :mod:`.ufm`), each independent of the others."""
