"""The InfiniBand kind's audit (pure): the isolation invariants (:mod:`.invariants`) over their lookups
(:mod:`.index`), SM hardening and keys, rogue-SM detection, standby SM files, where a port is."""
