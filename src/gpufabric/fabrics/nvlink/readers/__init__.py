"""Readers: pure parsers of the platform's own outputs (``nvidia-smi -q``, ``fmpm``; ``nvidia-smi topo -m`` is the InfiniBand kind's: its rails).

A reader takes the text a tool printed and returns immutable typed values; it runs nothing,
reads no file and holds no state. Bad text is refused with one ``ValidationError`` naming the
line. Each reader is held to real public outputs with provenance (tests/fixtures/real/).
"""
