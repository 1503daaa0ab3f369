"""``python -m lakecore.cli``: the ``lakecore`` command."""

import sys

from lakecore.cli import main

sys.exit(main())
