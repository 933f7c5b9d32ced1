"""``placetune selftest``: the first command on a new Jetson; checks the real stack in order, writes a shareable report.

Checks, in order (issue 12's "On a real Jetson"): the CUDA binding in the worker Python;
TensorRT's version and DLA cores; a tiny CNN all-GPU and all-DLA0 in FP16 (helper layers'
devices, DLA loadables against ``trtexec --useDLACore=0 --allowGPUFallback``, latency
against trtexec within 10%); INT8 on DLA without a calibration cache; pipelines
GPU->DLA0->GPU at K=1..3 (the gate passes, a deliberately wrong cut fails, loadables per core
<= 16) and DLA0||DLA1 replicas; a second run hits the engine cache; the worker exits with
status 0; power rails found. Each check is ``ok``, ``failed`` or ``skipped`` with why.

The report (``selftest.txt`` and ``selftest.json``) holds versions, statuses and figures,
never environment variables; paths under the home directory are written as ``~``.
Exit status: 0 when every check is ok; 8 (backend) when any check failed or could not run
(off a Jetson, most are skipped, so the exit status is 8 there).
"""

from __future__ import annotations

import os
import platform as _platform
import subprocess
import sys
import time
from typing import Any, Callable

from placetune.validate import dumps_json

__all__ = ["run_selftest", "EXIT_NOT_ALL_OK"]

#: exit status when a check failed or was skipped (the README's backend code)
EXIT_NOT_ALL_OK = 8
MODEL = "model-gn"  # a tiny CNN with non-trivial weights (zoo)


def _scrub(text: str) -> str:
    home = os.path.expanduser("~")
    return text.replace(home, "~") if home and home != "/" else text


class _Report:
    def __init__(self) -> None:
        self.checks: list[dict[str, Any]] = []

    def add(self, name: str, status: str, detail: str, **figures: Any) -> None:
        self.checks.append({"name": name, "status": status, "detail": _scrub(detail), **figures})

    def guarded(self, name: str, fn: Callable[[], tuple[str, str, dict]], needs: str | None) -> None:
        if needs:
            self.add(name, "skipped", needs)
            return
        try:
            status, detail, figures = fn()
        except Exception as exc:  # noqa: BLE001 - a check that breaks is a failed check, and the rest still run
            status, detail, figures = "failed", f"{type(exc).__name__}: {exc}", {}
        self.add(name, status, detail, **figures)


def _measure(model, plat: str, backend, placement, **settings):
    from placetune import Placement
    from placetune.settings import Settings
    from placetune.tuning.evaluator import Evaluator

    ev = Evaluator(model, plat, backend, settings=Settings(**settings), store=None)
    return ev.evaluate(Placement(ev.model, placement))


def run_selftest(out_dir: str | os.PathLike[str], worker_python: str | None = None,
                 worker_env: dict[str, str] | None = None, trtexec: str | None = None) -> tuple[int, dict[str, Any]]:
    """Run every check, write ``selftest.txt`` / ``selftest.json`` into ``out_dir``.

    Returns:
        (exit status: 0 all ok, :data:`EXIT_NOT_ALL_OK` otherwise; the report as a dict).
    """
    from placetune.backends.tensorrt import env as trt_env
    from placetune.backends.tensorrt.backend import TensorRTBackend
    from placetune.backends.tensorrt.pool import WORKER_FILE, WorkerPool
    from placetune.backends.trtexec.find import which_trtexec
    from placetune.hardware.power import discover_rails
    from placetune.model.model import Model

    from placetune.files.folder import OutputFolder

    report = OutputFolder(out_dir, "selftest report folder")  # overwrites only an earlier report of its own
    report.check(["selftest.json", "selftest.txt"])
    report.mkdir()
    out = report.directory
    python = worker_python or sys.executable
    rep = _Report()
    t_start = time.time()
    # 1. the CUDA binding in the worker Python
    pool = WorkerPool(python, worker_env, start_timeout_s=120)
    try:
        reply = pool.run({"op": "probe"}, timeout_s=120)
    finally:
        pool.close()
    probe = reply.result if reply.kind == "result" else {}
    if probe.get("cuda_binding"):
        rep.add("cuda", "ok", f"{probe['cuda_binding']} {probe.get('cuda_version')} on {probe.get('cuda_device')}")
    else:
        why = probe.get("cuda_error") or f"the worker did not answer ({reply.kind})"
        rep.add("cuda", "failed", why if "fix:" in why else f"{why}; fix: {probe.get('cuda_fix') or ''}")
    # 2. TensorRT and DLA cores
    version, cores = probe.get("trt_version"), probe.get("num_dla_cores")
    if version:
        rep.add("tensorrt", "ok" if cores else "failed", f"TensorRT {version}, {cores} DLA core(s)",
                trt_version=version, dla_cores=cores)
    else:
        rep.add("tensorrt", "failed", f"cannot import tensorrt in {python}: {probe.get('trt_error')}")
    no_trt = None if version and probe.get("cuda_binding") else "needs TensorRT and a CUDA binding in the worker"
    no_dla = no_trt or (None if cores else "needs a DLA core")
    trtexec = trtexec or which_trtexec()
    plat = trt_env.read_module() or "orin-agx"
    model = Model.load(MODEL, batch=4)
    cache = out / "cache"
    be = TensorRTBackend(worker_python=worker_python, worker_env=worker_env, cache_dir=cache) if not no_trt else None
    gpu = {l.name: "GPU" for l in model.layers}
    dla0 = {l.name: "DLA0" for l in model.layers}
    dla1 = {l.name: "DLA1" for l in model.layers}

    def engine(devs, precision):
        def check():
            m = _measure(model, plat, be, devs, precision=precision)
            if not m.ok:
                return "failed", f"{m.status}: {m.reason}", {}
            helpers = {k: v for k, v in (m.extra.get("helper_layers") or {}).items()}
            figs = {"latency_ms": m.latency_ms["median"], "dla_loadables": m.dla_loadables,
                    "realized": m.realized, "helper_layers": helpers}
            if trtexec and devs is not gpu:
                from placetune.backends.registry import get_backend

                tx = get_backend("trtexec", trtexec=trtexec, cache_dir=cache / "trtexec")
                t = _measure(model, plat, tx, devs, precision=precision)
                if not t.ok:
                    return "failed", f"trtexec: {t.status}: {t.reason}", figs
                figs.update(trtexec_latency_ms=t.latency_ms["median"], trtexec_loadables=t.dla_loadables)
                ratio = m.latency_ms["median"] / t.latency_ms["median"]
                ours, theirs = m.dla_loadables or {}, t.dla_loadables or {}
                if any(n > theirs.get(core, 0) for core, n in ours.items()):
                    # more loadables than trtexec: parser helpers split a DLA island (issue 12 defect 3);
                    # fewer is fine (a helper of a node that fell back stays on the GPU with it)
                    return "failed", f"DLA loadables {ours} vs trtexec {theirs}", figs
                if abs(ratio - 1) > 0.10:
                    return "failed", f"latency {ratio:.2f}x vs trtexec (allowed within 10%)", figs
            return "ok", f"{m.status}, median {m.latency_ms['median']:.3f} ms, loadables {m.dla_loadables}", figs
        return check

    rep.guarded("engine all-GPU fp16", engine(gpu, "fp16"), no_trt)
    rep.guarded("engine all-DLA0 fp16 (vs trtexec)", engine(dla0, "fp16"),
                no_dla or (None if trtexec else "needs trtexec"))
    rep.guarded("engine all-DLA0 int8, no calibration cache", engine(dla0, "int8"), no_dla)
    half = {l.name: ("DLA0" if len(model.layers) // 3 <= i < 2 * len(model.layers) // 3 else "GPU")
            for i, l in enumerate(model.layers)}

    def pipelines():
        figs: dict[str, Any] = {}
        for k in (1, 2, 3):
            m = _measure(model, plat, be, half, mode="pipeline", frames_in_flight=k)
            gate = m.extra.get("gate") or {}
            if not m.ok or not gate.get("passed"):
                return "failed", f"K={k}: {m.status}: {m.reason}", figs
            if any(n > 16 for n in (m.dla_loadables or {}).values()):
                return "failed", f"K={k}: more than 16 loadables on a core: {m.dla_loadables}", figs
            figs[f"K{k}"] = {"period_ms": m.extra.get("period_ms"), "latency_ms": m.latency_ms["median"],
                             "loadables": m.dla_loadables}
        wrong = TensorRTBackend(worker_python=worker_python, worker_env=worker_env, cache_dir=cache,
                                test_wrong_cut=True)
        try:  # seed-block: its concat reads two same-typed cut tensors, which the wrong cut swaps
            block = Model.load("seed-block")
            w = _measure(block, plat, wrong, {"/conv3/Conv": "DLA0"}, mode="pipeline")
        finally:
            wrong.close()
        if w.status != "runtime_failed":
            figs["wrong_cut"] = w.status
            return "failed", f"a deliberately wrong cut was not caught by the gate ({w.status}: {w.reason})", figs
        return "ok", "gate passes at K=1..3; a wrong cut fails it", figs

    rep.guarded("pipeline GPU->DLA0->GPU K=1..3, wrong cut", pipelines, no_dla)

    def replicas():
        m = _measure(model, plat, be, gpu, mode="replicas", replicas={"DLA0": 1, "DLA1": 1})
        return ("ok" if m.ok else "failed"), f"{m.status} {m.reason or ''}".strip(), {}

    rep.guarded("DLA0 || DLA1", replicas, no_dla if not no_dla and (cores or 0) >= 2 else (no_dla or "needs 2 DLA cores"))

    def second_run():
        m = _measure(model, plat, be, half, mode="pipeline", frames_in_flight=2)
        hits = (m.extra.get("engine_cache") or {}).get("hits", 0)
        return ("ok" if m.ok and hits > 0 else "failed"), f"engine cache {m.extra.get('engine_cache')}", {}

    rep.guarded("second run hits the engine cache", second_run, no_dla)
    if be is not None:
        be.close()
    p = subprocess.run([python, str(WORKER_FILE)], input='{"op": "probe"}\n', capture_output=True, text=True,
                       timeout=120, env={**os.environ, **(worker_env or {})})
    aborted = "context stack" in p.stderr
    rep.add("worker exit", "ok" if p.returncode == 0 and not aborted else "failed",
            f"exit status {p.returncode}" + ("; pycuda aborted: context stack was not empty" if aborted else ""))
    rails = discover_rails()
    rep.add("power rails", "ok" if rails else "skipped", ", ".join(r.name for r in rails) or "no INA3221 rails found "
            "(not a Jetson, or /sys not readable)")
    ok = all(c["status"] == "ok" for c in rep.checks)
    doc = {"placetune_selftest": 1, "python": _platform.python_version(), "machine": _platform.machine(),
           "l4t": trt_env.read_l4t(), "jetpack": trt_env.read_jetpack(), "module": trt_env.read_module(),
           "seconds": round(time.time() - t_start, 1), "all_ok": ok, "checks": rep.checks}
    report.write("selftest.json", dumps_json(doc, indent=1))
    report.write("selftest.txt", format_report(doc))
    return (0 if ok else EXIT_NOT_ALL_OK), doc


def format_report(doc: dict[str, Any]) -> str:
    """The text report: one line per check (``[ok]``, ``[FAILED]``, ``[skipped]``) and why."""
    lines = [f"placetune selftest: python {doc['python']} ({doc['machine']}), L4T {doc['l4t']}, "
             f"JetPack {doc['jetpack']}, {doc['module'] or 'unknown module'}"]
    for c in doc["checks"]:
        tag = {"ok": "[ok]     ", "failed": "[FAILED] ", "skipped": "[skipped]"}[c["status"]]
        lines.append(f"{tag} {c['name']}: {c['detail']}")
    lines.append("all checks ok" if doc["all_ok"] else
                 "not every check passed: send selftest.txt and selftest.json (nothing secret in them)")
    return "\n".join(lines) + "\n"
