"""Numbers from rankings: per-query metric definitions, the measure registry with its batch kernels, the scoring core
(qrels and a run in, per-query values out), tie policies and statistics.

Modules here import nothing from ``evalkit.retrieval``, ``evalkit.reporting`` or the runner and front doors.
"""
