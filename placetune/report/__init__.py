"""Reports: PNG plots of a study and Chrome traces of a plan."""
