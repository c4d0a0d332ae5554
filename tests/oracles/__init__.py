"""Independent transcriptions of the seed programs (Python ints, no nxgates code): what the tests compare to."""
