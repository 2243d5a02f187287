"""The ``carbonstore`` command line.

Each module of ``carbonstore.commands`` exposes ``register(subparsers, parents)``; this
file only wires them together, resolves ``--store`` / ``--conf`` and turns our errors into
one clear line (exit 2 for a user mistake, 1 for anything else we raise on purpose).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from carbonstore.errors import CarbonStoreError, UserError

__all__ = ["build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # A usage mistake is a user mistake: one line and exit status 2, like UserError.
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store", default=argparse.SUPPRESS,
        help="store location (path or URI); default: carbon.storelocation (./carbon.store)",
    )
    common.add_argument(
        "--conf", default=argparse.SUPPRESS,
        help="properties file (default: $CARBON_CONF); see conf/carbon.properties",
    )
    parser = _Parser(
        prog="carbonstore",
        description="A segment store of Parquet files with side indexes, driven by PySpark.",
        parents=[common],
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    import carbonstore.commands as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"carbonstore.commands.{info.name}")
        module.register(sub, [common])
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.store = getattr(args, "store", None)
    args.conf = getattr(args, "conf", None)
    try:
        return int(args.func(args) or 0)
    except UserError as err:
        print(f"carbonstore: error: {err}", file=sys.stderr)
        return 2
    except CarbonStoreError as err:
        print(f"carbonstore: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except OSError as err:
        # The store folder is missing, unwritable, a file, ... : say so without a traceback.
        print(f"carbonstore: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("carbonstore: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
