"""The built-in measure families' definitions, one module per family (as ranx keeps one file per metric).

Each module holds its family's per-query **reference** function (the definition, with its formula, its reference, its
edge cases and what it does with unjudged documents) and its batch **kernel** (the same values for every query at
once); :mod:`evalkit.measures.kernels.shared` holds what several read. The families are declared, with their typed
parameters, in :mod:`evalkit.measures.families`.
"""
