"""The foundation every stage uses: errors, units, IP families, YAML and shipped files, host
processes, network-namespace entry, scratch directories, C builds, phase timers and progress lines.
It imports nothing else of netslo."""
