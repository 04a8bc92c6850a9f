"""NVLink isolation through NVIDIA Fabric Manager's Shared NVSwitch model (partitions of GPUs
activated and deactivated with ``fmpm``). Imports only ``gpufabric.domain`` and ``gpufabric.transport``;
the skeleton of every kind (kind, views/inventory, backend, drivers/, readers/ and audit, plan,
state/entries/segments), enforced by import-linter."""
