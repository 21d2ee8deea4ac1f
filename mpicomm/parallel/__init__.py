"""Model parallelism beside the data-parallel strategies: pipeline stages and tensor-parallel pairs.

``pipeline``: the GPipe and 1F1B schedules as pure functions, and their slot-count
simulation (bubble, micro-batches held). ``stage``: one pipeline stage's layers,
forward and backward per micro-batch, messages through the p2p transport.
``tensor``: Megatron-style column- then row-parallel layer pairs. ZeRO is an engine
(``mpicomm.engine.zero``).
"""
