"""Systems under test: the Profile interface, the built-in systems, system
files and their templates. No Docker, no SSH."""
