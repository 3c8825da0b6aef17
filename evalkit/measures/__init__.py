"""Numbers from rankings: the measure families (declared once, with their typed parameters, in
:mod:`~evalkit.measures.families`; each family's reference function and batch kernel in its own module under
:mod:`~evalkit.measures.kernels`), the registry that parses measure names into them, the scoring core
(rankings and judgments in, per-query values out), means and latency summaries, tie policies, statistics, and the
scored results of running systems over a fixture (:mod:`evalkit.measures.results`) that the report and its views
read.

Modules here import nothing from ``evalkit.retrieval``, ``evalkit.reporting`` or the runner and front doors.
"""
