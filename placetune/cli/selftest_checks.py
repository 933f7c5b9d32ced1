"""The verdicts of ``placetune selftest``'s checks: pure functions from what a check read to its status and line.

Each says when a check fails (a fault of the stack), when it cannot tell and says so, and when
what it found is a setup step of the board (``setup``) or a figure this board cannot give
(``unavailable``), neither of which fails the selftest. :mod:`placetune.cli.selftest` runs the checks.
"""

from __future__ import annotations

import re
from typing import Any, Callable

__all__ = ["within_tolerance", "dla_count_hint", "pip_wheel_hint", "probe_died", "compare_timing", "compare_loadables", "gate_kind", "clocks_check", "energy_check",
           "LATENCY_TOLERANCE", "LATENCY_ALLOWANCE_MS", "WRONG_DATA_REL_L2", "NA", "SETUP", "UNAVAILABLE", "PASSING"]

#: a check that does not apply here (DLA checks without a DLA...)
NA = "n/a"
#: How far the worker's median latency of an engine may be from trtexec's of the same engine:
#: ``|worker - trtexec| <= LATENCY_TOLERANCE * trtexec + LATENCY_ALLOWANCE_MS``. Both time one query
#: in flight between CUDA events around the enqueue (trtexec with ``--exposeDMA``:
#: :mod:`placetune.backends.timing_method`), so no systematic offset is left but the host's cost
#: of starting the enqueue: the worker calls ``execute_async_v3`` through Python (a bound-method
#: call and pybind11's dispatch between recording the start event and the first launch), trtexec
#: through C++; that is microseconds per query on a Jetson's CPU and does not scale with the
#: engine, hence a fixed allowance of 50 us. What does scale: the two runs are separate
#: processes timed one after the other, so a DVFS step between them (clocks not locked:
#: ``sudo jetson_clocks``) or the median of a different number of samples moves the ratio by a
#: few per cent on a locked board; 10 % leaves room for that and still catches the offset the
#: two-in-flight default gives (up to one enqueue, which is tens of per cent of a small engine).
LATENCY_TOLERANCE = 0.10
#: the fixed part of the allowance (ms): the Python-vs-C++ enqueue start (see LATENCY_TOLERANCE)
LATENCY_ALLOWANCE_MS = 0.05


def within_tolerance(worker_ms: float, trtexec_ms: float) -> bool:
    """True when the worker's median latency of an engine agrees with trtexec's of the same engine
    (:data:`LATENCY_TOLERANCE` of trtexec's plus :data:`LATENCY_ALLOWANCE_MS`).

    Example:
        >>> within_tolerance(0.33, 0.30), within_tolerance(1.25, 1.0)
        (True, False)
    """
    return abs(worker_ms - trtexec_ms) <= LATENCY_TOLERANCE * trtexec_ms + LATENCY_ALLOWANCE_MS


def _spread(stats: dict[str, Any]) -> str:
    """trtexec's own spread of one run, as a text: ``median 0.412 ms (p90 0.430, p99 0.455)``."""
    extra = ", ".join(f"{k} {stats[k]:.3f}" for k in ("p90", "p99") if isinstance(stats.get(k), (int, float)))
    return f"median {stats['median']:.3f} ms" + (f" ({extra})" if extra else "")


def compare_timing(ours: dict[str, Any], theirs: dict[str, Any],
                   again: Callable[[], tuple[dict[str, Any] | None, dict[str, Any] | None]],
                   clocks_locked: bool | None,
                   throttled: Callable[[], list[str]] | None = None) -> tuple[str | None, dict[str, Any]]:
    """The worker's latency statistics of an engine against trtexec's of the same engine:
    ``(None, figures)`` when they agree (:func:`within_tolerance`), else ``(why, figures)``.

    Two processes timed one after the other on a real board can differ by a passing DVFS step, a
    thermal step or a background process, in either run; a real difference of method (a systematic
    offset) repeats. So a disagreement is timed again once on both sides (``again()``: the worker's
    and trtexec's statistics of a second run, None for a run that failed) and fails only when no
    pair of a worker run and a trtexec run agrees. The failure line gives every run's median and
    trtexec's own spread (p90, p99). When the clocks are not known to be locked (``clocks_locked`` not
    True) a disagreement that repeats is no evidence either way: the devfreq governor may run the GPU at
    any frequency between its ``min_freq`` and ``max_freq`` in each run (what ``jetson_clocks`` pins
    together), several-fold apart (the modes of NVIDIA's nvpmodel files alone put the GPU's cap anywhere
    from 306 MHz to 1301 MHz, :mod:`placetune.hardware.power_modes`), which no fixed tolerance bounds without
    measurements on unlocked boards, and none are published. So ``figures["unverified"]`` is set and the
    line says NOT VERIFIED with the command: the check is then a setup step of the board (``setup``,
    exit 0 with the [SETUP] line, as for the clocks check itself), never a pass and never a failure.
    Each run's statistics may carry ``engine``, a digest of the engine file it timed: in engine mode the
    worker's second timing loads the engine file its first build kept (the same engine), but with the
    engine cache off it builds the engine again and writes it over that file, which trtexec's second run
    loads, and a rebuild may pick other tactics. Only runs of one engine are paired,
    and only one engine's two runs are drift (``figs["engine_rebuilt"]`` when the builds differ).
    Locked clocks that a thermal or power cap slows (``throttled()``, read when a disagreement has
    repeated: the locked clocks running below their locked frequency, as the clocks check reads them)
    move either run as unlocked ones do: the same NOT VERIFIED, naming the clocks, never a failure.

    Example:
        >>> compare_timing({"median": 0.34}, {"median": 0.30}, lambda: (None, None), True)
        (None, {'trtexec_latency_ms': 0.3, 'latency_ratio': 1.1333})
        >>> compare_timing({"median": 0.40}, {"median": 0.30}, lambda: (None, {"median": 0.39}), True)[1]["retimed"]
        True
    """
    figs: dict[str, Any] = {"trtexec_latency_ms": theirs["median"],
                            "latency_ratio": round(ours["median"] / theirs["median"], 4)}
    if within_tolerance(ours["median"], theirs["median"]):
        return None, figs
    ours2, theirs2 = again()
    figs["retimed"] = True
    ours2 = ours2 if ours2 and ours2.get("median") else None
    theirs2 = theirs2 if theirs2 and theirs2.get("median") else None
    if ours2:
        figs["latency_ms_again"] = ours2["median"]
    if theirs2:
        figs["trtexec_latency_ms_again"] = theirs2["median"]
    rebuilt = any(r is not None and not _same_engine(ours, r) for r in (ours2, theirs2))
    if rebuilt:
        figs["engine_rebuilt"] = True
    drift = _run_to_run(ours, ours2, theirs, theirs2, figs)
    for w, t in ((ours, theirs2), (ours2, theirs2), (ours2, theirs)):
        if w and t and _same_engine(w, t) and within_tolerance(w["median"], t["median"]):
            figs.update(latency_ms=w["median"], trtexec_latency_ms=t["median"],
                        latency_ratio=round(w["median"] / t["median"], 4))
            if drift:  # the two methods agree, but the same engine moved between two runs of one of them
                figs["drift"] = drift
            return None, figs
    mine = f"{ours['median']:.3f} ms" + (f" and again {ours2['median']:.3f} ms" if ours2 else
                                         " (timing it again failed)")
    runs = _spread(theirs) + (f"; again: {_spread(theirs2)}" if theirs2 else "; timing it again failed")
    if rebuilt:
        runs += (" (the second timing's engine was rebuilt and differs from the first: only the runs of "
                 "one engine were compared)")
    slowed = (throttled() if throttled is not None else []) if clocks_locked is True else []
    if clocks_locked is True and not slowed:
        fix = "the clocks are locked, so this is a real difference of timing method: send this report"
    elif slowed:
        figs["unverified"] = True
        figs["throttled"] = list(slowed)
        fix = (f"NOT VERIFIED: the clocks are locked but throttled ({'; '.join(slowed)}: a thermal or power cap), "
               "which moves either run as the cap moves the clock, so this disagreement says nothing of the timing "
               "method: let the board cool (`sudo jetson_clocks --fan`), then the selftest again; if it still "
               "differs with no clock below its lock, send this report")
    else:
        # unlocked clocks move either run by as much as the DVFS governor steps the GPU clock, which no
        # tolerance bounds: the comparison is not made, and said so (a setup step, not a pass or a failure)
        figs["unverified"] = True
        fix = ("NOT VERIFIED: the clocks are not known to be locked (see the clocks line), and DVFS moves either "
               "run by as much as the GPU clock steps, so this disagreement says nothing of the timing method: run "
               "`sudo jetson_clocks`, then the selftest again; if it still differs, send this report")
    return (f"the same engine: median {mine} by placetune, by trtexec {runs} "
            f"({figs['latency_ratio']:.2f}x; allowed {LATENCY_TOLERANCE:.0%} + {LATENCY_ALLOWANCE_MS * 1000:.0f} us, "
            f"no run of one within it of a run of the other): both time one query in flight (trtexec "
            f"--exposeDMA); {fix}"), figs


def _same_engine(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two runs timed one engine: their ``engine`` digests (of the engine file each timed) are
    equal, or either has none (nothing says otherwise)."""
    return a.get("engine") is None or b.get("engine") is None or a["engine"] == b["engine"]


def _run_to_run(ours: dict[str, Any], ours2: dict[str, Any] | None, theirs: dict[str, Any],
                theirs2: dict[str, Any] | None, figs: dict[str, Any]) -> str | None:
    """The same engine's run-to-run change on each side (``figs["run_to_run_pct"]``), and a line when
    either moved by more than the tolerance between its two runs (None otherwise): the board's
    timings drift between runs seconds apart, and a tune's figures of the placements move as much."""
    moved = {}
    for side, a, b in (("placetune", ours, ours2), ("trtexec", theirs, theirs2)):
        if b and _same_engine(a, b):  # two builds' runs are two engines, not one engine's drift
            moved[side] = (a["median"], b["median"])
    figs["run_to_run_pct"] = {k: round(100.0 * (b - a) / a, 1) for k, (a, b) in moved.items()}
    far = [f"{k}'s two runs {a:.3f} and {b:.3f} ms ({100.0 * (b - a) / a:+.0f}%)" for k, (a, b) in moved.items()
           if not within_tolerance(b, a)]
    if not far:
        return None
    return ("RUN-TO-RUN DRIFT: the same engine timed twice seconds apart moved by more than the "
            f"{LATENCY_TOLERANCE:.0%} + {LATENCY_ALLOWANCE_MS * 1000:.0f} us allowed: " + "; ".join(far)
            + ": this board's timings move between runs (a DVFS or thermal step, another process), and a tune's "
            "figures move as much; check `sudo jetson_clocks --show` and what else runs, then the selftest again")


def compare_loadables(ours: dict[str, int], theirs: dict[str, int],
                      theirs_extra: dict[str, Any]) -> tuple[str | None, str | None]:
    """The worker's DLA loadables of the all-DLA0 engine against trtexec's own build of it:
    ``(why it failed, None)``, ``(None, why they cannot be compared)`` or ``(None, None)`` (agree).

    Both read the count from their build log (and the engine's layer information) through the same
    reader (:func:`placetune.backends.tensorrt.placement_known.decide`). Where trtexec's side cannot
    tell (its placement is unknown: ``placement_known`` False, or no count for the core: TensorRT
    10.3 prints its ``N out of M`` / ``successfully offloaded`` lines at VERBOSE only), there is
    nothing to compare: the check says so and does not fail on it (the worker's own count was
    already checked, :func:`_ran_on_dla`). More loadables in the worker's engine than in trtexec's
    fails: parser helper layers split a DLA island; fewer is fine (a helper of a node that fell
    back stays on the GPU with it).

    Example:
        >>> compare_loadables({"DLA0": 1}, {"DLA0": 1}, {})
        (None, None)
        >>> compare_loadables({"DLA0": 2}, {}, {"placement_known": False, "placement_unknown": "no lines"})[1]
        "DLA loadables cannot be compared: trtexec's build log does not say where TensorRT put the layers (no lines)"
    """
    unknown = theirs_extra.get("placement_known") is False or any(c not in theirs for c in ours)
    if unknown:
        why = theirs_extra.get("placement_unknown") or f"it reports no loadable count for {', '.join(ours) or 'DLA0'}"
        return None, f"DLA loadables cannot be compared: trtexec's build log does not say where TensorRT put the layers ({why})"
    if any(n > theirs.get(c, 0) for c, n in ours.items()):
        return f"DLA loadables {ours} vs trtexec's {theirs} (more loadables than trtexec's own build: send this report)", None
    return None, None


#: Relative L2 error above which a pipeline's output is wrong data, not arithmetic: FP16 moves a
#: 6-layer chain's output by 5.7e-4 (FP32 accumulation) to 4.9e-3 (FP16 accumulation, the worst case;
#: benchmarks/fp16_gate_noise.py), the FP16 gate allows 2e-2; a swapped or stale cut tensor gives ~1.
WRONG_DATA_REL_L2 = 0.2


def gate_kind(gate: dict[str, Any]) -> str:
    """What a failed correctness gate's error looks like, as a suffix of its line ("" when it has no
    relative error): arithmetic (above the tolerance, far below wrong data) or wrong data at a cut.

    Example:
        >>> gate_kind({"tolerance": 0.02, "outputs": {"y": {"rel_l2": 0.05, "passed": False}}})[:45]
        '; the worst relative L2 error, 0.05, is above'
    """
    rels = [r.get("rel_l2") for r in (gate.get("outputs") or {}).values() if not r.get("passed")]
    rels = [x for x in rels if isinstance(x, (int, float))]
    if not rels:
        return ""
    worst = max(rels)
    if worst < WRONG_DATA_REL_L2:
        return (f"; the worst relative L2 error, {worst:.3g}, is above the gate's {gate.get('tolerance')} but far "
                f"below wrong data (~1): this board's DLA arithmetic differs from its GPU's more than FP16 rounding "
                f"explains (at most ~0.005): send this report (a tune rejects such pipelines)")
    return (f"; the worst relative L2 error, {worst:.3g}, is wrong data, not rounding: a cut tensor was read "
            f"before it was written or from another frame: send this report")


#: a setup step the board still needs before a tune (not a fault of the stack): ``[SETUP]`` in the report
SETUP = "setup"
#: a figure this board cannot give (not a fault of the stack): ``[unavailable]``; a study that needs it is refused
UNAVAILABLE = "unavailable"
#: the statuses that do not fail the selftest (exit status 0): the stack works
PASSING = ("ok", NA, SETUP, UNAVAILABLE)


def clocks_check(power_mode: str | None, locked: bool | None,
                 throttled: list[str] | None = None) -> tuple[str, str, str]:
    """``(name, status, detail)`` of the clocks a run assumes: the nvpmodel mode (recorded in every
    study's fingerprint: a study refuses to resume under another) and whether jetson_clocks is on.

    On is what ``jetson_clocks`` sets: each clock's minimum raised to its maximum (``MinFreq ==
    MaxFreq``, :func:`placetune.backends.tensorrt.env.parse_jetson_clocks`). ``throttled``: the locked
    clocks that ran below their locked frequency when read (a thermal or power cap): said on the line,
    still ``ok`` (the clocks are locked; a tune judges each measurement's clocks,
    :mod:`placetune.backends.clocks`). Before, a board read as root whose current frequencies were
    below their maxima was taken for unlocked, and a tune as root stopped at its first build.

    Clocks not locked are a setup step of the board, not a fault of the stack: status ``setup``
    (``[SETUP]`` in the report, with the command; the selftest still exits 0 when the stack works),
    and a real run stops at its first build until it is done (placetune.tuning.first_build)."""
    mode = f"nvpmodel mode {power_mode}" if power_mode else "nvpmodel mode unknown (nvpmodel -q did not answer)"
    if locked is True and throttled:
        return "clocks", "ok", (f"{mode}; jetson_clocks on (CPU and GPU clocks fixed: minimum = maximum); THROTTLED "
                                f"when read: {'; '.join(throttled)} (a thermal or power cap, not unlocked clocks): "
                                "timings taken while it lasts run below the locked clocks and a tune marks them "
                                "untrusted; let the board cool (`sudo jetson_clocks --fan`) before a tune")
    if locked is True:
        return "clocks", "ok", f"{mode}; jetson_clocks on (CPU and GPU clocks fixed)"
    if locked is False:
        return "clocks", SETUP, (f"{mode}; jetson_clocks is off (`jetson_clocks --show`: a CPU's or the GPU's minimum frequency is not its maximum), so "
                                  "timings drift with DVFS and a tune stops at its first build: run "
                                  "`sudo jetson_clocks` before a tune")
    return "clocks", SETUP, (f"{mode}; whether jetson_clocks is on could not be read (`jetson_clocks --show` "
                              "is missing or needs root, and the CPU/GPU frequency limits in /sys could not be "
                              "read): run `sudo jetson_clocks` before a tune, and the selftest with sudo to check it")


def energy_check(rails: list[str], seen: dict[str, Any], have_trtexec: bool) -> tuple[str, str, str]:
    """``(name, status, detail)`` of energy: the rails, and an energy figure from trtexec's timing of
    the all-GPU engine (the backend that samples power by default).

    No energy figure is not a fault of the stack (a module's rails differ, /sys may need root, a study
    that does not minimise energy never reads them): status ``unavailable``, and a study whose
    objective or constraints need energy is refused at its first build on such a board
    (:func:`placetune.tuning.first_build.measurement_problem`: "no energy figure")."""
    refused = "a study with --objective energy (or an energy constraint) is refused on this board"
    if not rails:
        return "power rails", UNAVAILABLE, ("no INA3221 rails found (not a Jetson, or /sys not readable): "
                                             f"energy cannot be measured here; {refused}")
    names = ", ".join(rails)
    if not have_trtexec or not seen:
        return "power rails", UNAVAILABLE, (f"{names}; no trtexec timing ran, so no energy figure was read: "
                                             "whether energy can be measured is not known")
    if seen.get("energy_mj") is None:
        why = ((seen.get("power") or {}).get("reason") or f"trtexec's timing {seen.get('status')}"
               + (f": {seen['reason']}" if seen.get("reason") else ""))
        return "power rails", UNAVAILABLE, f"{names} found but no energy figure: {why}; {refused}"
    return "power rails", "ok", f"{names}; {seen['energy_mj']:.3f} mJ per inference of the all-GPU engine"


def dla_count_hint(version: str, module_title: str) -> str:
    """Why TensorRT ``version`` may report fewer DLA cores than the module has ("" when no reason is
    known): 10.8 and later 10.x have no DLA (10.7 was the last), 11.0-11.3 none, 11.4.1 on Jetson
    AGX Orin only with JetPack 7.2.2+ (TensorRT 11.4.1 release notes).

    Example:
        >>> dla_count_hint("10.16.2", "Jetson AGX Orin 64GB")
        ' (TensorRT 10.8 and later 10.x have no DLA: 10.7 was the last; JetPack 6.1/6.2 ship 10.3)'
    """
    nums = [int(x) for x in re.findall(r"\d+", version or "")[:2]] + [0, 0]
    major, minor = nums[0], nums[1]
    if major == 10 and minor > 7:
        return " (TensorRT 10.8 and later 10.x have no DLA: 10.7 was the last; JetPack 6.1/6.2 ship 10.3)"
    if major == 11 and minor < 4:
        return " (TensorRT 11.0-11.3 support no DLA; 11.4.1 brings it back on AGX Orin with JetPack 7.2.2)"
    if major >= 11 and "AGX Orin" not in module_title:
        return (f" (TensorRT 11.4.1 supports DLA on Jetson AGX Orin only, with JetPack 7.2.2 or later; "
                f"not on a {module_title})")
    if major >= 11:
        return (" (TensorRT 11.4.1 has the DLA on AGX Orin with JetPack 7.2.2 or later only: its release notes say "
                "the SBSA build does not provide DLA outside NVIDIA JetPack; check `dpkg-query -W nvidia-jetpack`)")
    return ""


def pip_wheel_hint(trt_path: str | None, version: str | None = None) -> str:
    """Why the worker's TensorRT may not be JetPack's ("" when it looks like JetPack's): JetPack installs
    TensorRT's bindings with apt (python3-libnvinfer) into ``/usr/lib/python3*/dist-packages``; a
    ``tensorrt`` in a ``site-packages`` folder was installed by pip, and shadows JetPack's in a venv.
    Not for TensorRT 11.4.1 and later: its release notes tell JetPack 7.2.2 users to install the Linux
    SBSA build, wheel included, "rather than a JetPack-specific one".

    Example:
        >>> pip_wheel_hint("/usr/lib/python3.10/dist-packages/tensorrt/__init__.py")
        ''
        >>> pip_wheel_hint("/home/u/venv/lib/python3.10/site-packages/tensorrt/__init__.py")[:40]
        ' (this tensorrt was installed by pip in '
    """
    path = str(trt_path or "")
    nums = tuple(int(x) for x in re.findall(r"\d+", version or "")[:3])
    if "site-packages" not in path or nums >= (11, 4, 1):
        return ""
    return (f" (this tensorrt was installed by pip in {path.split('site-packages')[0]}site-packages, not JetPack's "
            "python3-libnvinfer in /usr/lib/python3*/dist-packages: `pip uninstall tensorrt` in that environment "
            "so that JetPack's TensorRT is used)")


def probe_died(reply: Any, python: str) -> str:
    """The line of a probe the worker never answered: it crashed (with its signal, e.g. a segmentation
    fault while importing tensorrt or initialising CUDA), timed out or could not be started, with the last
    line it wrote to stderr. Not the advice to install a binding or TensorRT: nothing says one is missing."""
    if reply.kind == "timeout":
        how = "did not answer its probe within 120 s (killed)"
    elif reply.kind == "crashed" and (reply.signal or reply.returncode is not None):
        how = f"died during its probe ({reply.signal or f'exit status {reply.returncode}'})"
    else:
        how = f"could not run its probe ({reply.kind})"
    tail = [line.strip() for line in (reply.stderr_tail or "").splitlines() if line.strip()]
    return (f"the worker ({python}) {how}; the probe imports tensorrt, makes a TensorRT builder and initialises the "
            f"CUDA binding" + (f"; its last words: {tail[-1][:300]}" if tail else "; it wrote nothing to stderr")
            + "; run `placetune doctor` with the same Python to see which step fails")
