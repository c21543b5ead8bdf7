"""`leaseline serve`: the results browser over every run folder."""
