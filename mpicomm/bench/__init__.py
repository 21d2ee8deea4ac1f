"""Benchmarking, an application over the reducers: the nccl-tests-style harness (``harness``),
collective plug-ins (``allreduce``), predictions for clusters that are not here (``predict``,
``profiles``), the model beside each measured row (``model_rows``) and mpiexec command lines
(``launch``). The commands themselves live in ``mpicomm.cli``; statistics in
``mpicomm.analysis``; the cost model's measurement in ``mpicomm.costmodel.measure``."""
