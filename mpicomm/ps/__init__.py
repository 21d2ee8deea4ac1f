"""The parameter server as people build it: servers own parameters and optimizer.

Modes: sync, async, ssp (bounded staleness).
"""
