"""How gpufabric reaches devices: SSH sessions (:mod:`.sshrun`), secrets and TLS files read from
disk (:mod:`.secrets`) and the thread pool that runs one session per device (:mod:`.parallel`).

The fabric packages and the service layers import it; the pure layers (``domain``, ``planning``,
``audit``) may not (import-linter: "pure layers do no I/O").
"""
