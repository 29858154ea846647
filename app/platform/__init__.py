"""What every part stands on: paths, errors, units, atomic writes, the log, crash
reports, safe text, child processes, memory probes and their recordings."""
