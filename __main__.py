"""`python -m leaseline`: the `leaseline` command."""

from leaseline.cli import main

main(prog_name="leaseline")
