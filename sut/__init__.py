"""Systems under test that ship with Leaseline (the reference cluster leasekv)."""
