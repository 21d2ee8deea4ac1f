"""Benchmarking, an application over the reducers: the nccl-tests-style harness (``harness``),
collective plug-ins (``allreduce``), the cost model's measurement (``measure``) and the
``model`` command (``model_cmd``)."""
