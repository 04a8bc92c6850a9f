"""The local lab: ibsim + OpenSM + Open vSwitch + network namespaces, started for real."""
