"""The JVM-free operations of the user's ``Table``: ``scan`` (read into Arrow, pandas or
DuckDB, docs/python-api.md) and ``append`` (write rows through the load writer)."""
