"""Expressions: nodes and builders, binding to a schema, the SQL WHERE parser, visitors."""
