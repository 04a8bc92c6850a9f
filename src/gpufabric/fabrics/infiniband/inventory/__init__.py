"""The InfiniBand kind's inventory import formats: ``ibnetdiscover`` output matched to hosts (:mod:`.match`),
checked against what the store knows (:mod:`.claims`), each port's path up the subnet (:mod:`.uplinks`)."""
