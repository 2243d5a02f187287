"""``python -m carbonstore.cli``: the same program as the ``carbonstore`` console script."""

import sys

from carbonstore.cli.app import main

sys.exit(main())
