"""Numbers from rankings: per-query metric definitions, the measure registry with its batch kernels, the scoring core
(qrels and a run in, per-query values out), tie policies, statistics, and the scored results of running systems over
a fixture (:mod:`evalkit.measures.results`) that the report and its views read.

Modules here import nothing from ``evalkit.retrieval``, ``evalkit.reporting`` or the runner and front doors.
"""
