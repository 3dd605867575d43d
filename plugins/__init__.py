"""pytest plugins of netslo: CLI options, markers, SLO assertion reporting, results files."""
