"""`python -m proctree`: the proctree command."""

import sys

from .cli import main

sys.exit(main())
