"""`gpu2dra doctor`: the DRA readiness checklist, one PASS / WARN / FAIL line per check.

`gather` reads the cluster (GETs only); every check (the registry in `checks/`) is a pure
function of it; `render` prints the verdicts; `command` runs the three.
"""
