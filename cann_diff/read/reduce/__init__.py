"""The per-rank reduce, in the worker that read the rank.

A rank's raw rows become canonical rows of the chosen steps, then the summaries the
comparison reads. ``ranks.py`` runs it (small ranks stacked and reduced in one pass),
``summary.py`` builds and combines ``RunSummary``s, ``timeline.py`` does the interval
arithmetic, ``device_memory.py`` reduces memory samples, ``framework.py`` attributes
kernels to framework operators (``nesting.py``: host ops nested in one another).
"""
