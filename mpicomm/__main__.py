import sys

from mpicomm.cli.main import main

sys.exit(main())
