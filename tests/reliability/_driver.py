"""Run ``placetune`` as a subprocess with fault-injection knobs (used by the reliability and fleet tests).

    python tests/reliability/_driver.py [--measure-delay S] [--ack FILE] [--fsize-limit BYTES] -- tune ...

* ``--measure-delay S``: every simulated measurement takes S seconds more (an engine build
  is slow on a real Jetson; this widens the window in which a worker is killed mid-measure).
  The environment fingerprint is unchanged.
* ``--ack FILE``: after each *stored* measurement, append ``<measurement id> <placement key>``
  to FILE (the test then knows what the process had committed when it was killed).
* ``--fsize-limit BYTES``: ``RLIMIT_FSIZE`` (no file of this process may grow past BYTES;
  SIGXFSZ ignored so writes fail with EFBIG): a disk that fills up.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import sys
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--measure-delay", type=float, default=0.0)
    ap.add_argument("--ack", default=None)
    ap.add_argument("--fsize-limit", type=int, default=None)
    ap.add_argument("argv", nargs=argparse.REMAINDER)
    ns = ap.parse_args()
    argv = ns.argv[1:] if ns.argv[:1] == ["--"] else ns.argv
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

    from placetune.backends.simulate.simulator import SimulatedJetson
    from placetune.cli.main import main as cli_main
    from placetune.tuning.evaluator import Evaluator

    if ns.measure_delay > 0:
        measure = SimulatedJetson.measure

        def slow(self, *a, **kw):  # type: ignore[no-untyped-def]
            time.sleep(ns.measure_delay)
            return measure(self, *a, **kw)

        SimulatedJetson.measure = slow  # type: ignore[method-assign]
    if ns.ack:
        ack = open(ns.ack, "a", buffering=1)  # noqa: SIM115 - lives as long as the process
        init = Evaluator.__init__

        def init_with_ack(self, *a, **kw):  # type: ignore[no-untyped-def]
            init(self, *a, **kw)

            def note(placement, m):  # type: ignore[no-untyped-def]
                if not m.extra.get("cache_hit") and m.extra.get("_id") is not None:
                    ack.write(f"{m.extra['_id']} {m.extra.get('requested_key', '')}\n")

            self.add_callback(note)

        Evaluator.__init__ = init_with_ack  # type: ignore[method-assign]
    if ns.fsize_limit is not None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (ns.fsize_limit, ns.fsize_limit))
    print(f"driver pid {os.getpid()} ready", file=sys.stderr, flush=True)
    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
