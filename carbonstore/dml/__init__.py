"""Row-level DELETE, UPDATE and MERGE executed as Spark jobs (docs/dml.md, "Execution").

The driver plans with the index and commits; Spark reads the kept files natively, evaluates
the user's conditions and values as Spark SQL, and its tasks write the delete deltas and the
new rows. The commit, its conflict rules, crash points and statement leases are
``segments.dml_commit`` / ``segments.dml_conflicts``.
"""

from carbonstore.dml.merge import WhenMatched, WhenNotMatched, WhenNotMatchedBySource, merge_rows
from carbonstore.dml.statements import delete_rows, update_rows

__all__ = ["WhenMatched", "WhenNotMatched", "WhenNotMatchedBySource", "delete_rows",
           "merge_rows", "update_rows"]
