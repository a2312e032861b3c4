"""``python -m cann_diff`` runs the command line."""

from .cli import run

run()
