"""What goes out: the privacy-safe report (with the calibration record it embeds), comparisons and the regression
gate, quality gates, notebook tables and figures, TREC run files. Built from the scoring core's results
(:mod:`evalkit.measures.results`); nothing here imports the runs of systems or the front doors."""
