"""The self-test's second timing: which runs of the worker and of trtexec time the same engine.

In engine mode the worker builds the engine again for its second timing (its measure job keeps no
engine cache: ``placetune/backends/tensorrt/backend.py``, the job has no ``plan_cache``) and writes it
over the first one's file (``save_plan`` is named by a digest of the job, the same job both times:
``worker_time.py``), which trtexec's second run then loads. A rebuild may pick other tactics, so the
second pair times another engine than the first: a worker run of one build compared with a trtexec run
of the other is no comparison of timing methods, and one side's two runs of two builds are no drift.
Each run's figures carry the digest of the engine file it timed (``engine``); only runs of one engine
are paired. Checked against these figures only (no board).
"""

from __future__ import annotations

from placetune.cli.selftest_checks import compare_timing


def test_runs_of_two_different_builds_are_never_paired():
    # build a: worker 0.40, trtexec 0.30 (disagree); build b: worker 0.30, trtexec 0.41 (disagree too).
    # Before, the worker's build-b run (0.30) was paired with trtexec's build-a run (0.30): a pass.
    ours, theirs = {"median": 0.40, "engine": "a"}, {"median": 0.30, "engine": "a"}
    why, figs = compare_timing(ours, theirs, lambda: ({"median": 0.30, "engine": "b"},
                                                      {"median": 0.41, "engine": "b"}), True)
    assert why is not None and "real difference of timing method" in why
    assert "rebuilt" in why and figs["engine_rebuilt"] is True


def test_two_builds_on_one_side_are_not_called_drift():
    # the rebuild is faster (0.30 by both): they agree on build b, and the worker's 0.40 -> 0.30 is two
    # engines, not the board's run-to-run drift; trtexec's two runs are of two engines too
    why, figs = compare_timing({"median": 0.40, "engine": "a"}, {"median": 0.30, "engine": "a"},
                               lambda: ({"median": 0.30, "engine": "b"}, {"median": 0.30, "engine": "b"}), True)
    assert why is None and figs["latency_ms"] == 0.30 and figs["trtexec_latency_ms"] == 0.30
    assert "drift" not in figs and figs["run_to_run_pct"] == {} and figs["engine_rebuilt"] is True


def test_the_same_engine_rebuilt_byte_for_byte_pairs_every_run_as_before():
    why, figs = compare_timing({"median": 0.60, "engine": "a"}, {"median": 0.30, "engine": "a"},
                               lambda: ({"median": 0.31, "engine": "a"}, {"median": 0.30, "engine": "a"}), True)
    assert why is None and figs["latency_ms"] == 0.31 and "engine_rebuilt" not in figs
    assert figs["drift"].startswith("RUN-TO-RUN DRIFT:")  # one engine timed twice: the board moved
