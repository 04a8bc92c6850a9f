"""The fault campaign of issue 35 (its foundation): ``checker`` (pure invariants) and ``readers``
(ovs-vsctl, SMP under ibsim, fmpm, the API over HTTP) import nothing from gpufabric; ``campaign``
is the seeded nemesis + workload; tests/e2e/test_chaos_short.py runs a short campaign on the lab.

Covered here: kill -9 of serve, of the lab's ovsdb-server and OpenSM (restarted), a Fabric Manager
stand-in restarted. Not yet: PostgreSQL and two replicas, SM pairs and two subnets, bonds, DPUs on
OVN, switch SSH sessions, Kubernetes, clocks, network namespaces cut; no data plane on ibsim, and
FM/UFM/switches are stand-ins."""
