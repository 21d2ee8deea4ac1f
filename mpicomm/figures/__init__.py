"""The figure pipeline: ``python -m mpicomm experiments`` and ``python -m mpicomm plot``.

``registry``  ``@figure(key, title)``, the ``Context`` a figure runs in, its ``Section``
``catalog``   figures 1-3 and 8 (bench, model, compare sweeps, predictions)
``sweeps``    figures 4-7 (hierarchy against bandwidth, fusion/overlap, compression, PS)
``layouts``   figure 9 (which parallelism layout wins as the model widens, the link slows)
``workload_scaling`` figure 10 (PS, ring, hierarchical efficiency for real models, 8 to 1,024 GPUs)
``runner``    runs the chosen figures, saves sections, regenerates experiments/README.md
``plot``      the standard figures of one result file (matplotlib, loaded on first use)

An application over bench (profiles, launch) and analysis; the cli imports it when
the command runs, so no other command loads matplotlib.
"""
