"""Training, an application over the reducers: the config, data, the one SGD loop, checkpoints,
the run record (``train.loop.run_training``; the model is ``mpicomm.nn``, the commands
``cli/train.py`` and ``cli/compare.py``)."""
