"""The reliability suite prints what it did (faults, survivals, rows lost, fuzz counts) at the end."""

from __future__ import annotations

from ._harness import COUNTS, NOTES


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001 - pytest hook
    if not COUNTS and not NOTES:
        return
    tr = terminalreporter
    tr.write_sep("-", "placetune reliability suite")
    c = COUNTS
    if c["faults"]:
        tr.write_line(f"faults injected: {c['faults']} ({c['kills']} SIGKILL, {c['disk_full']} disk full, "
                      f"{c['locked']} locked database, {c['newer_schema']} newer schema); runs survived "
                      f"(database opens, no partial row, resume completes): {c['survived']}; rows lost: "
                      f"{c['rows_lost']}")
    for kind in ("onnx_backend", "onnx_mutations"):
        if c[f"{kind}_tried"]:
            tr.write_line(f"{kind.replace('_', ' ')}: {c[f'{kind}_tried']} tried, {c[f'{kind}_imported']} imported, "
                          f"{c[f'{kind}_refused']} refused with a PlacetuneError, {c[f'{kind}_crashed']} crashed")
    if c["plans_tried"]:
        tr.write_line(f"bad plan files: {c['plans_tried']} tried, {c['plans_refused']} refused with a clear error, "
                      f"{c['plans_crashed']} crashed")
    for line in NOTES:
        tr.write_line(line)
