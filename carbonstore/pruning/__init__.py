"""Pruning: the row-group/page evaluator, the planner, the table plan and the driver index cache."""
