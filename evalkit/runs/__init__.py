"""Systems executed over queries: the built-in ablations, evaluation of any system on a fixture, calibration, the
Ray cluster, scoring run files, and the real-data benchmark. Above the scoring core, below the front doors."""
