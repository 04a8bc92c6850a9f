"""Pure parsers of the InfiniBand tools' outputs: ``ibnetdiscover`` (:mod:`.ibnetdiscover`), infiniband-diags
and the OpenSM log (:mod:`.diags`), raw SMP attributes (:mod:`.smp`),
``nvidia-smi topo -m`` (:mod:`.topo`: the GPU <-> HCA rail affinity)."""
