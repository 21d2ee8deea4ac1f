"""Analysis: pure functions over run records, no MPI — below train, bench and torch.

``verdict``    noise-aware comparisons (bootstrap intervals, ties, crossovers, who is late)
``crossover``  where the significant winner of two strategies changes with size (bench)
``reading``    the plain-language reading under compare's table
``report``     the results table of training runs
"""
