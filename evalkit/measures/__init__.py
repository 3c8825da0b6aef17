"""Numbers from rankings: the measure families (:mod:`~evalkit.measures.families`, one module each, declared once
with their reference function and batch kernel), the registry that parses measure names into them, the scoring core
(rankings and judgments in, per-query values out), means and latency summaries, tie policies, statistics, and the
scored results of running systems over a fixture (:mod:`evalkit.measures.results`) that the report and its views
read.

Modules here import nothing from ``evalkit.retrieval``, ``evalkit.reporting`` or the runner and front doors.
"""
