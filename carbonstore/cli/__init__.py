"""The ``carbonstore`` command line: ``app.py`` wires the command modules of this package
(its explicit list ``COMMANDS``) into one parser; ``submit.py`` is the spark-submit entry
file. ``carbonstore`` (the console script) and ``python -m carbonstore.cli`` run :func:`main`.
"""

from carbonstore.cli.app import COMMANDS, build_parser, main, one_line

__all__ = ["COMMANDS", "build_parser", "main", "one_line"]
