"""Numbers from rankings: per-query metric definitions (and, built on them, batch kernels and statistics).

Modules here import nothing from ``evalkit.retrieval``, ``evalkit.reporting`` or the runner and front doors.
"""
