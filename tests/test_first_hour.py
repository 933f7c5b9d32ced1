"""What a new user meets in the first hour of the Python API and the Gymnasium environments, as the
README shows them: printed results that fit a terminal, and the README's Gymnasium snippets as written."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import placetune as pt


def test_a_printed_measurement_is_one_short_line():
    """``print(ev.evaluate(...))`` used to dump every latency sample, per-layer time and the placement of
    every layer (11 KB for ResNet-18, more for a detector)."""
    ev = pt.Evaluator("yolov8n", "orin-agx", mode="pipeline", objective="throughput")
    space = ev.space()
    m = ev.evaluate(space.to_placement([0] * space.n_units))
    text = repr(m)
    assert len(text) < 300 and "\n" not in text, text
    assert f"throughput_fps={m.throughput_fps:.4g}" in text and "simulated=True" in text
    assert f"realized={{GPU: {len(m.realized)}}}" in text
    failed = pt.Measurement.failure("build_failed", "DLA compiler error")
    assert repr(failed).startswith("Measurement(status='build_failed', reason='DLA compiler error'")
    assert str(m) == repr(m)


def test_the_readme_mask_call_works_through_gym_make():
    """gym.make wraps the env; Gymnasium 1.x forwards no attribute, so ``env.action_masks()`` fails: the
    README tells the call that works (MaskablePPO finds the method itself)."""
    env = gym.make("placetune/Placement-v0", model="resnet18", platform="orin-agx", precision="int8")
    obs, info = env.reset(seed=0)
    masks = env.get_wrapper_attr("action_masks")()
    assert np.array_equal(masks, info["action_mask"]) and np.array_equal(env.unwrapped.action_masks(), masks)
    readme = (__import__("pathlib").Path(__file__).parents[1] / "README.md").read_text()
    assert 'env.get_wrapper_attr("action_masks")()' in readme
