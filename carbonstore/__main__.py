"""``python -m carbonstore``: the ``carbonstore`` command line (carbonstore/cli/)."""

import sys

from carbonstore.cli.app import main

sys.exit(main())
