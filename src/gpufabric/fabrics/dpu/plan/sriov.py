"""The SR-IOV network node policy a DPU-host node needs (pure): switchdev eSwitch, netdevice
VFs, VF 0 (the OVN-Kubernetes management port) excluded from the pool.

The output is an ``sriovnetwork.openshift.io/v1`` ``SriovNetworkNodePolicy`` for the SR-IOV
Network Operator; apply it with ``oc apply -f``. Changing eSwitch mode or firmware on a BlueField
needs a power cycle of the host."""

from __future__ import annotations

from typing import Any

from gpufabric.domain.errors import ValidationError
from gpufabric.fabrics.dpu.entries.info import DpuInfo
from gpufabric.fabrics.dpu.plan.profiles import HOST_LABELS


def sriov_policy(info: DpuInfo, resource: str = "dpu_vfs", namespace: str = "openshift-sriov-network-operator") -> dict[str, Any]:
    if not resource.replace("_", "").isalnum():
        raise ValidationError("sriov.resource", resource, "letters, digits and _")
    return {
        "apiVersion": "sriovnetwork.openshift.io/v1",
        "kind": "SriovNetworkNodePolicy",
        "metadata": {"name": f"{info.host}-{info.pf}"[:63], "namespace": namespace},
        "spec": {
            "resourceName": resource,
            "nodeSelector": {"kubernetes.io/hostname": info.host, HOST_LABELS[0]: ""},
            "numVfs": info.vfs,
            "nicSelector": {"pfNames": [f"{info.pf}#1-{info.vfs - 1}"]},
            "eSwitchMode": "switchdev",
            "deviceType": "netdevice",
            "isRdma": False,
        },
    }
