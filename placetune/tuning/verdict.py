"""The verdict of a tuning run: one sentence that says what was found and what it rests on.

A search that ends on a baseline has not shown that the baseline is the best plan for the
device: it has shown that *this agent, in this many trials*, found nothing better. The verdict
says exactly that ("no plan better than all-GPU found by random in 40 trials"), and when the run
did find a better plan, by how much and against which baseline, with the trials it took and
whether the figures are simulated. It never claims something about the device ("all-GPU wins").
"""

from __future__ import annotations

from typing import TYPE_CHECKING
import shlex

from placetune.wording import figure, plural
from placetune.placement.placement import DEVICES

if TYPE_CHECKING:
    from placetune.measurement import Measurement
    from placetune.settings import Settings
    from placetune.tuning.objectives import Objective

__all__ = ["verdict", "per_stream_line", "best_caveats"]


def verdict(objective: "Objective", best: "Measurement | None", baselines: dict[str, "Measurement | None"],
            agent: str, trials: int, *, simulated: bool = False) -> str:
    """One sentence: what the run found, against the best measured baseline, and on what it rests.

    Args:
        objective: the study's objective.
        best: the study's best measurement (None: nothing succeeded).
        baselines: label -> measurement of the study's baselines (None: not measured).
        agent: the agent that searched.
        trials: the study's trials so far.
        simulated: the figures come from the simulated Jetson (said in the sentence).

    Example:
        >>> from placetune.tuning.objectives import get_objective
        >>> from placetune.measurement import Measurement
        >>> m = Measurement(status="ok", latency_samples_ms=[2.0], throughput_fps=500.0)
        >>> verdict(get_objective("throughput"), m, {"all-GPU": m}, "random", 40)
        'verdict: no plan better than all-GPU found by random in 40 trials'
    """
    sim = " (simulated figures)" if simulated else ""
    rests = f"by {agent} in {trials} trial{'s' if trials != 1 else ''}"
    measured = {k: m for k, m in baselines.items() if m is not None and m.ok and objective.value(m) is not None}
    if best is None or objective.value(best) is None:
        return f"verdict: no successful measurement {rests}{sim}"
    if not measured:
        return (f"verdict: best {objective.names[0]} {figure(objective.value(best))} found {rests}, "
                f"with no baseline measured to compare it with{sim}")
    label, base = min(measured.items(), key=lambda kv: objective.loss(kv[1]))
    same = best.realized is not None and best.realized == base.realized
    if same or objective.loss(best) >= objective.loss(base):
        return f"verdict: no plan better than {label} found {rests}{sim}"
    gain = objective.gain_over(best, base)
    how = "" if gain is None else f" {gain:.2f}x better in {objective.names[0]} than"
    return f"verdict: a plan{how or ' better than'} {label} (the best baseline) found {rests}{sim}"


def agent_hint(verdict_text: str, agent: str, trials: int) -> str | None:
    """A hint to try the guided agent when another one found no plan better than the baselines."""
    if not verdict_text.startswith("verdict: no plan better than") or agent in ("guided", "exact"):
        return None
    return (f"hint: {agent} found nothing better; the guided agent (the default) searches the stages TensorRT's "
            "fusions form and often finds what it misses: run the same command with --agent guided and --trials "
            f"above {trials} (the budget counts over resumes)")


def next_steps(storage: str, study: str, in_memory: bool = False) -> str:
    """The lines after a tune: the commands that turn the study into a deployment folder and a report,
    one a line (side by side, two commands with a long study name ran past any terminal's width).
    ``in_memory``: the study's database was in memory, gone with the run: no command can read it again."""
    if in_memory:
        return ("the study was kept in an in-memory database, gone with this run: the plan file is what remains "
                "(give --storage FILE.db to keep a study to resume, export or report)")
    where = "" if storage in ("sqlite:///placetune.db", "placetune.db") else f" --storage {shlex.quote(storage)}"
    which = f"{where} --study {shlex.quote(study)}"
    return (f"next: placetune export{which} --format trtexec -o deploy   (build.sh and the engines' ONNX, for the "
            f"Jetson)\n      placetune report{which} -o report   (plots)")


def placement_line(realized: dict[str, str], settings: "Settings") -> str:
    """The best plan's layers per device. In replicas mode the placement is what every DLA replica
    runs on its own core, so its DLA layers are the replicas' (not DLA0's)."""
    share = {d: 0 for d in DEVICES}
    for d in realized.values():
        share[d] = share.get(d, 0) + 1
    n = max(len(realized), 1)
    if settings.mode != "replicas":
        return "best placement (realised): " + ", ".join(
            f"{d} {k} layers ({100 * k / n:.0f}%)" for d, k in share.items() if k)
    dla = sum(k for d, k in share.items() if d != "GPU")
    parts = [f"{d} {k} layers ({100 * k / n:.0f}%)" for d, k in (("GPU", share.get("GPU", 0)), ("their DLA", dla)) if k]
    gpu = "; the GPU replica runs every layer on the GPU" if "GPU" in (settings.replicas or {"GPU": 1}) else ""
    return "best placement (realised) of the DLA replicas: " + ", ".join(parts) + gpu


def best_caveats(m: "Measurement") -> list[str]:
    """What the best plan's figures do not rest on, one line each, for the summary under its placement:
    where TensorRT put its layers could not be read (``placement_known`` False: no realised placement
    at all), was read from the build log alone (``placement_unchecked``), or its pipeline's correctness
    gate checked nothing (``gate_unverified``). The run says each only at its first occurrence, hours
    before the summary; a best plan carrying one is named here again. Empty when none applies."""
    extra = m.extra or {}
    lines = []
    if m.segments_read is not None:  # a pipeline with some segments read: their layers known, the rest not
        lines.append(f"best placement: PARTLY UNKNOWN where TensorRT put its layers, {m.unread_line()}; its "
                     "timing is kept and ranked, but no plan is exported from it")
    elif not m.placement_known:
        lines.append("best placement: UNKNOWN where TensorRT put its layers ("
                     + str(extra.get("placement_unknown") or "its build could not say") + "); its timing is kept")
    elif extra.get("placement_unchecked"):
        lines.append("best placement: read from the build log only, unchecked against the engine "
                     f"({extra['placement_unchecked']})")
    if extra.get("gate_unverified"):
        lines.append(f"best plan's outputs: UNCHECKED, the correctness gate checked nothing ({extra['gate_unverified']})")
    return lines


def per_stream_line(rows: "list[tuple[str, Measurement | None]]", streams: int) -> str | None:
    """Each of ``streams`` camera streams' frames per second when they share a plan's frames evenly
    (N streams of one detector): ``per stream (4 streams): all-GPU 203 fps, best found 311 fps each``.
    None when no row has a throughput."""
    parts = [f"{label} {figure(m.throughput_fps / streams)} fps" for label, m in rows
             if m is not None and m.ok and m.throughput_fps]
    if not parts:
        return None
    return f"per stream ({plural(streams, 'stream')} sharing the frames evenly): " + ", ".join(parts) + " each"
