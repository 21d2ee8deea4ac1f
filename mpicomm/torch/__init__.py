"""mpicomm from PyTorch (optional extra ``[torch]``): never imported by ``import mpicomm``."""
