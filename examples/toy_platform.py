"""A platform in one file: a module placetune does not ship, made known by name.

The figures below are made up (half an AGX Orin with one DLA core), so this is a toy: a real module's
figures come from NVIDIA's module data sheet and its nvpmodel file, and ``source`` says so. Register
it, then use its name anywhere a platform is named::

    import placetune as pt
    from toy_platform import TOY_ORIN
    pt.register_platform(TOY_ORIN, aliases=("toy",))
    ev = pt.Evaluator("seed-block", "toy-orin")   # or: placetune tune --platform toy-orin
"""

from __future__ import annotations

import dataclasses

import placetune as pt

#: A hypothetical Orin module with one DLA core and half the GPU (figures made up for the example).
TOY_ORIN = dataclasses.replace(
    pt.get_platform("orin-agx"),
    name="toy-orin",
    title="Toy Orin (example: made-up figures)",
    dla_count=1,
    gpu_fp16_tflops=pt.get_platform("orin-agx").gpu_fp16_tflops / 2,
    gpu_int8_tops=pt.get_platform("orin-agx").gpu_int8_tops / 2,
    gpu_sm_count=8,
    power_modes=("MAXN", "20W"),
    source="examples/toy_platform.py: made-up figures, not a real module",
)

if __name__ == "__main__":
    pt.register_platform(TOY_ORIN, aliases=("toy",))
    ev = pt.Evaluator("seed-block", "toy", mode="engine")
    m = ev.evaluate(pt.Placement.all_dla(ev.model))
    print(f"{ev.platform.title}: devices {', '.join(ev.platform.devices)}; all-DLA0 {m.median_ms:.3f} ms (simulated)")
