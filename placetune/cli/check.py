"""``placetune check MODEL``: which layers can run on a DLA, and why not.

By default a short answer that fits one screen: the model's summary (layers, DLA-eligible, DLA islands), what
``tune`` would refuse, the layers that cannot run on a DLA counted by reason (with their op types), how to see
the per-layer table, and the commands to run next. ``--layers`` prints the per-layer table first, fitted to
the terminal's width (80 columns when the output is not a terminal, so that a log is the same every time): a
long layer name is cut in its middle (``/layer1/lay...sample.0/Conv``), and a layer that cannot run on a DLA
gets its reason, in a short phrase, on the line under it. ``--wide`` prints the whole table (every name, every
reason in full, one row a line); ``--json`` every field.
"""

from __future__ import annotations

import argparse
import re
import shlex
import textwrap
from typing import TYPE_CHECKING, Any

from placetune._lazy import lazy_import
from placetune.cli.checks import load_model
from placetune.cli.terminal import shape_text, show, table, terminal_width
from placetune.hardware.platforms import get_platform
from placetune.settings import DEFAULT_PRECISION, check_trt_version
from placetune.safetext import line_safe
from placetune.wording import plural, wrap

if TYPE_CHECKING:
    import placetune.inputdata as _inputdata
    import placetune.model.misreads as _misreads
    import placetune.placement.placement as _placement
    import placetune.placement.realise as _realise
    import placetune.plan.trtexec as _trtexec
else:
    _inputdata = lazy_import("placetune.inputdata")
    _misreads = lazy_import("placetune.model.misreads")
    _placement = lazy_import("placetune.placement.placement")
    _realise = lazy_import("placetune.placement.realise")
    _trtexec = lazy_import("placetune.plan.trtexec")

__all__ = ["cmd_check", "check_table", "refusal_groups", "short_reason", "with_dla", "LOG_WIDTH", "MAX_GROUPS"]

#: The width of the table when the output is not a terminal (a pipe, a log file).
LOG_WIDTH = 80

#: The most reasons the short output lists (the rest are counted; ``--layers`` shows every layer's).
MAX_GROUPS = 12

#: The most op types named for one reason (``Add, Mul, Sub, ...``).
_MAX_OPS = 4

#: A parenthesis that says where a rule comes from (a log, a guide, a header), not what it is.
_SOURCE = re.compile(r" \([^()]*\b(?:log|guide|header|DLA-SW|notes|docs?)\b[^()]*\)")


def short_reason(reason: str) -> str:
    """A DLA rule's reason as a short phrase: its first clause, without the note of where the rule comes from
    (the whole reason stays in ``--wide`` and ``--json``).

    Example:
        >>> short_reason("Slice runs FP16 only on DLA (TensorRT 8.x DLA guide; got int8)")
        'Slice runs FP16 only on DLA'
    """
    text = _SOURCE.sub("", reason)
    head = text.split("; ")[0].strip()
    return head if head.count("(") == head.count(")") else text.strip()


def _middle(text: str, width: int) -> str:
    """``text`` cut in its middle to ``width`` characters (``/layer1/lay...sample.0/Conv``)."""
    if len(text) <= width:
        return text
    left = (width - 3 + 1) // 2
    return text[:left] + "..." + text[len(text) - (width - 3 - left):]


def check_table(layers: list[dict[str, Any]], width: int | None, reasons: bool = True) -> str:
    """The per-layer table of ``check``: at ``width`` (None: the whole table, one row a line) its names cut
    in the middle to fit and each refusal's reason as a short phrase on the line under its layer (``reasons``
    False: none, a platform without a DLA refuses every layer for the one reason its summary gives)."""
    header = ("layer", "op", "input", "output", "DLA")
    rows = [[line_safe(x["name"]), x["op_type"], shape_text(x["input_shape"]), shape_text(x["output_shape"]),
             "yes" if x["dla"] else "no"] for x in layers]
    if width is None:
        return table([r + [x["reason"] or ""] for r, x in zip(rows, layers)], header + ("reason",))
    others = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)][1:]
    room = max(width - 1 - sum(others) - 2 * len(others), 12)
    for r in rows:
        r[0] = _middle(r[0], room)
    lines = table(rows, header).splitlines()
    out = lines[:2]
    for line, x in zip(lines[2:], layers):
        out.append(line)
        if reasons and x["reason"] and not x["dla"]:
            out += textwrap.wrap(line_safe(short_reason(x["reason"])), max(width - 1, 20), initial_indent="    ",
                                 subsequent_indent="      ", break_on_hyphens=False)
    return "\n".join(out)


def refusal_groups(layers: list[dict[str, Any]], width: int | None = None) -> str:
    """The layers that cannot run on a DLA, counted by their reason (as a short phrase), most first, each with
    the op types it holds (``  5  Add, Sub, Mul: DLA ElementWise needs 4D (N,C,H,W) tensors (got 3D)``); at
    most :data:`MAX_GROUPS` reasons, the rest counted on a line of their own. Empty when every layer can.
    With ``width``, a reason longer than the room goes on under its op types, not under its count.
    """
    groups: dict[str, list[str]] = {}
    for x in layers:
        if not x["dla"]:
            groups.setdefault(line_safe(short_reason(x["reason"] or "no DLA support")), []).append(
                line_safe(x["op_type"]))
    if not groups:
        return ""
    refused = sum(len(ops) for ops in groups.values())
    ranked = sorted(groups.items(), key=lambda kv: -len(kv[1]))  # (stable: ties keep the model's order)
    digits = len(str(len(ranked[0][1])))
    lines = [f"{plural(refused, 'layer')} cannot run on a DLA (they fall back to the GPU), by reason:"]
    for reason, ops in ranked[:MAX_GROUPS]:
        kinds = list(dict.fromkeys(ops))
        named = ", ".join(kinds[:_MAX_OPS]) + (", ..." if len(kinds) > _MAX_OPS else "")
        line = f"  {len(ops):>{digits}}  {named}: {reason}"
        lines += textwrap.wrap(line, max(width - 1, 20), subsequent_indent=" " * (4 + digits),
                               break_on_hyphens=False) if width else [line]
    rest = ranked[MAX_GROUPS:]
    if rest:
        lines.append(f"  and {plural(sum(len(ops) for _, ops in rest), 'layer')} for "
                     f"{plural(len(rest), 'other reason')} (--layers)")
    return "\n".join(lines)


def cmd_check(args: argparse.Namespace) -> int:
    model = load_model(args)
    platform = get_platform(args.platform)
    args.power_mode = platform.check_power_mode(args.power_mode)
    args.trt_version = args.trt_version or platform.trt_version_for(args.power_mode)
    check_trt_version(args.trt_version)  # (the versions measure and tune take: rules placetune knows)
    support = _realise.dla_support(model, platform, args.precision, args.trt_version)
    eligible = sum(1 for s in support.values() if s.supported)
    islands = _islands_before_limit(model, support) if platform.dla_count else 0
    # a form this TensorRT's ONNX parser imports as another network (tune and measure warn of it, build refuses it)
    misread = _misreads.old_parser_misread(model.proto, str(args.trt_version)) if model.proto is not None else None
    doc = {
        "model": model.name,
        "model_hash": model.hash,
        "platform": platform.name,
        "precision": args.precision,
        "trt_version": args.trt_version,
        "power_mode": args.power_mode,
        "layers": [
            {
                "name": layer.name,
                "op_type": layer.op_type,
                "input_shape": list(layer.input_shape),
                "output_shape": list(layer.output_shape),
                "dla": bool(support[layer.name].supported) and platform.dla_count > 0,
                "reason": support[layer.name].reason if platform.dla_count else f"{platform.name} has no DLA",
            }
            for layer in model.layers
        ],
        "summary": {
            "layers": len(model),
            "dla_eligible": eligible if platform.dla_count else 0,
            "dla_islands": islands,
            "exceeds_loadable_limit": islands > _realise.MAX_LOADABLES_PER_CORE,
            "gmacs": round(model.total_macs / 1e9, 4),
            "data_dependent_ops": _inputdata.data_dependent_ops(model),
            "parser_misread": misread,
            "problems": problems(model, args.precision, str(args.trt_version)),
        },
    }
    width = None if args.wide else (terminal_width() or LOG_WIDTH)
    s = doc["summary"]
    facts = (
        f"{model.name} on {platform.name} ({args.precision}, TensorRT {args.trt_version} rules, power mode "
        f"{args.power_mode}): "
        f"{s['layers']} layers, {s['dla_eligible']} DLA-eligible, {s['gmacs']} GMACs"
    )
    if platform.dla_count:
        limit = " (exceeds the 16-per-core limit: the rest fall back to GPU)" if s["exceeds_loadable_limit"] else ""
        facts += f"\nall-DLA with GPU fallback forms {plural(islands, 'DLA island')} (loadables){limit}"
    if s["data_dependent_ops"]:
        facts += (f"\ndata-dependent op(s) {', '.join(s['data_dependent_ops'])}: their work depends on the input, so "
                  "time it on representative input (measure/tune --input-data FILE.npz; docs/timing.md)")
    if misread:
        facts += (f"\nTensorRT {args.trt_version}'s ONNX parser would build another network than this model (its "
                  f"plans would be built wrong there): {misread}"
                  f"{_misreads.later_rules_hint(model.proto, str(args.trt_version)) if platform.name.startswith('orin') else ''}")
    for p in s["problems"]:
        facts += (f"\nproblem in {' and '.join(p['modes'])} mode (placetune tune refuses it, exit {p['exit_code']}; "
                  f"its plans could not be exported for trtexec): {line_safe(p['message'])}")
    same = _same_target(args)
    if not platform.dla_count:  # nothing to search: tune refuses this platform
        facts += (f"\n{platform.name} has no DLA core: every layer runs on the GPU, so there is no placement to tune "
                  f"(platforms with a DLA: {with_dla()})")
        after = f"\nnext: placetune measure {shlex.quote(args.model)}{same}   (the all-GPU figures)"
    else:
        after = (f"\nnext: placetune tune --model {shlex.quote(args.model)}{same}   (search placements)"
                 f"\n      placetune measure {shlex.quote(args.model)}{same} --placement all-dla   (one placement)")
    if args.layers or args.wide:  # the table first, the summary under it (where a terminal stops scrolling)
        human = check_table(doc["layers"], width, reasons=bool(platform.dla_count)) + "\n\n" + facts + after
    else:  # the summary, what tune refuses and why layers stay on the GPU first; the table on request
        groups = refusal_groups(doc["layers"], width) if platform.dla_count else ""
        if platform.dla_count and not groups:
            groups = "every layer can run on a DLA"
        human = (facts + (f"\n{groups}" if groups else "")
                 + "\nthe table of every layer (op, shapes, DLA or not, and why):"
                 + f"\n  placetune check {shlex.quote(args.model)}{same} --layers   (--wide: in full; --json: "
                   "every field)"
                 + after)
    show(args, doc, wrap(human, width))
    return 0


def problems(model: Any, precision: str, trt_version: str) -> list[dict[str, Any]]:
    """What ``placetune tune`` refuses at its start for this model (the export's own refusals,
    :func:`placetune.plan.trtexec.export_refusals`), each with the modes it holds in and its exit code."""
    every = _trtexec.export_refusals(model, "pipeline", precision, trt_version)
    out = [{"modes": ["engine", "pipeline", "replicas"], "exit_code": e.exit_code, "message": str(e)} for e in every]
    said = {str(e) for e in every}
    out += [{"modes": ["engine", "replicas"], "exit_code": e.exit_code, "message": str(e)}
            for e in _trtexec.export_refusals(model, "engine", precision, trt_version) if str(e) not in said]
    return out


def _same_target(args: argparse.Namespace) -> str:
    """The options of ``check`` that name the same model and target in ``tune`` and ``measure``,
    those left at their defaults left out."""
    parts = [f"--shape {shlex.quote(x)}" for x in args.shape or []]
    if args.batch is not None:
        parts.append(f"--batch {args.batch}")
    for option, value, default in (("--platform", args.platform, "orin-agx"),
                                   ("--precision", args.precision, DEFAULT_PRECISION),
                                   ("--power-mode", args.power_mode, "MAXN")):
        if value != default:
            parts.append(f"{option} {shlex.quote(str(value))}")
    return "".join(" " + p for p in parts)


def _islands_before_limit(model, support) -> int:
    """DLA islands of the all-DLA placement after fallback, before the 16-loadable cut."""
    dev = {n: ("DLA0" if support[n].supported else "GPU") for n in model.names}
    return _placement.Placement(model, dev).dla_islands()["DLA0"]




def with_dla() -> str:
    """The platforms that have a DLA core, as a message lists them."""
    from placetune.hardware.platforms import PLATFORMS

    return ", ".join(name for name, p in PLATFORMS.items() if p.dla_count)
