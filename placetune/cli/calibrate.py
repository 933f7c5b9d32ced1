"""The ``placetune calibrate`` command: fit a device profile to a study's stored measurements."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from placetune.cli.terminal import write_data
from placetune.validate import dumps_json
from placetune._lazy import lazy_import

if TYPE_CHECKING:
    import placetune.calibration.calibrate as _calibrate
else:
    _calibrate = lazy_import("placetune.calibration.calibrate")

__all__ = ["add_parser", "cmd_calibrate"]


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Fit, print the fit, write the profile (``-o``)."""
    names = list(args.study)
    to_stdout = args.output == "-"  # as export -o -: the profile on standard output, the table on standard error
    result = _calibrate.calibrate(names[0], args.storage, studies=names[1:], output=None if to_stdout else args.output,
                                  force=args.force, cross_validate=args.folds)
    if to_stdout:
        write_data(_calibrate.profile_text(result, list(dict.fromkeys(names))))
        print(result.table(), file=sys.stderr)
        return 0
    if args.json:
        print(dumps_json({"profile": result.profile.as_dict(), "in_sample": result.in_sample,
                          "cross_validated": result.cross_validated, "unidentified": result.unidentified,
                          "measurements": result.measurements, "output": args.output}, indent=2))
    else:
        print(result.table())
        if args.output:
            print(f"\ndevice profile written to {args.output} (use: placetune tune --device-profile {args.output})")
    return 0


def add_parser(sub) -> None:
    """Register ``calibrate`` on the subcommand parsers."""
    p = sub.add_parser("calibrate", help="fit a device profile (TOML) to a study's stored measurements")
    p.add_argument("--study", action="append", required=True,
                   help="study name (repeat for more studies of the same device)")
    p.add_argument("--storage", default="sqlite:///placetune.db", help="SQLAlchemy URL or SQLite path")
    p.add_argument("-o", "--output", help="write the fitted device profile here (TOML; - for standard output); "
                   "replaces an earlier profile or an empty file, another file only with --force")
    p.add_argument("--force", action="store_true", help="replace an existing -o file that is not a placetune "
                   "device profile")
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds (0: none)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.set_defaults(func=cmd_calibrate)
