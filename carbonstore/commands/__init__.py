"""CLI sub-commands; each module registers its own parsers (see carbonstore.cli)."""
