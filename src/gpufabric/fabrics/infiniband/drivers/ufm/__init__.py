"""The UFM driver (:mod:`.driver`): partitions through NVIDIA UFM Enterprise's REST API, planned by :mod:`.plan`."""
