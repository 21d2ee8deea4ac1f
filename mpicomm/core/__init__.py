"""The bottom layer: topology, array backend, options, errors, units.

Nothing here imports a strategy or an application.
"""
