"""What goes out: the privacy-safe report, quality gates, notebook tables and figures."""
