"""``python -m placetune``: the command line (as ``placetune`` and ``python -m placetune.cli``)."""

import sys

from placetune.cli.main import main

sys.exit(main())
