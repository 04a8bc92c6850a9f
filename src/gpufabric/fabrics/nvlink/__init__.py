"""NVLink isolation through NVIDIA Fabric Manager's Shared NVSwitch model (partitions of GPUs
activated and deactivated with ``fmpm``). Imports only ``gpufabric.domain``."""
