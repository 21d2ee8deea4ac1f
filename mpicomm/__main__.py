import sys

from mpicomm.cli import main

sys.exit(main())
