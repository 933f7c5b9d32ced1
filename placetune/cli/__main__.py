"""``python -m placetune.cli``: the command line."""

import sys

from placetune.cli.main import main

sys.exit(main())
