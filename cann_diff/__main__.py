"""``python -m cann_diff`` runs the command line."""

from .cli import main

main(prog_name="cann-diff")
