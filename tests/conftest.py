"""Shared fixtures: the real ONNX exports in tests/data and small helpers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# An unknown Measurement.extra key is an error in the tests (and their subprocesses): a misspelt
# key would otherwise read as a silent None.
os.environ["PLACETUNE_STRICT_EXTRA"] = "1"
import placetune.measurement  # noqa: E402

placetune.measurement.STRICT_EXTRA = True

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="session")
def seed_block():
    from placetune import Model

    return Model.load(DATA / "seed_block.onnx.gz")


@pytest.fixture(scope="session")
def seed_block_random(tmp_path_factory) -> Path:
    """seed_block as an ONNX file with random weights (the exports in tests/data have zeroed ones), so that
    its outputs mean something: what the TensorRT doubles run, the output gate compares and a deployment
    built from a plan computes."""
    import onnx

    from placetune import Model
    from placetune.model.source import load_source, randomize_weights

    path = tmp_path_factory.mktemp("models") / "seed_block_random.onnx"
    onnx.save(randomize_weights(load_source(Model.load(DATA / "seed_block.onnx.gz")), seed=1), str(path))
    return path


@pytest.fixture(scope="session")
def seed_model_gn():
    from placetune import Model

    return Model.load(DATA / "seed_model_gn.onnx.gz")


@pytest.fixture(scope="session")
def resnet18_export():
    from placetune import Model

    return Model.load(DATA / "resnet18.onnx.gz")


#: The 45 slowest tests of a whole run (``pytest --durations=45``; together 71 % of its time), and those
#: over 9 s in a later run (``-n 14 --durations=150``): ``-m "not slow"`` leaves them out, like the tests
#: marked ``@pytest.mark.slow`` in their files; under pytest-xdist they start first.
SLOW = {
    "tests/test_selftest.py::test_green_against_the_doubles_on_every_module_and_version",
    "tests/test_tune.py::test_every_study_file_runs_on_the_simulator[multi-camera.toml]",
    "tests/test_search_later.py::test_tune_stops_after_convergence_unless_told_to_use_the_whole_budget",
    "tests/test_trt_pipeline.py::test_repeated_jobs_leave_no_cuda_resources_behind[pycuda]",
    "tests/test_trt_pipeline.py::test_repeated_jobs_leave_no_cuda_resources_behind[cuda-python]",
    "tests/test_selftest.py::test_unlocked_clocks_fail_their_own_check_and_nothing_else",
    "tests/test_search_later.py::test_a_noisy_settled_study_resumed_starts_from_all_its_measurements",
    "tests/test_search_later.py::test_by_default_the_whole_budget_is_spent_and_the_stopped_run_is_no_worse",
    "tests/test_tune.py::test_sigint_stops_cleanly_and_resume_finishes_budget",
    "tests/test_constraints.py::test_every_agent_returns_the_best_feasible[guided-kw2-20]",
    "tests/reliability/test_kill.py::test_sigkill_at_random_points_loses_nothing",
    "tests/test_constraints.py::test_agents_that_start_from_baselines_find_a_feasible_plan",
    "tests/test_concurrent.py::test_tune_concurrent_reports_naive_baselines_and_exports_every_network",
    "tests/test_constraints.py::test_constrained_tune_exports_a_plan_that_meets_the_bound",
    "tests/test_tune.py::test_embedded_default_runs_and_resumes",
    "tests/test_deploy.py::test_the_deploy_example_runs_end_to_end_against_the_doubles",
    "tests/reliability/test_onnx_fuzz.py::test_onnx_backend_test_models",
    "tests/reliability/test_faults.py::test_disk_full_tmpfs_clear_error_rows_intact",
    "tests/test_tune.py::test_every_study_file_runs_on_the_simulator[googlenet-energy-bound.toml]",
    "tests/test_constraints.py::test_export_and_studies_of_a_constrained_study_rank_feasible_first",
    "tests/reliability/test_faults.py::test_disk_full_rlimit_clear_error_rows_intact",
    "tests/test_tune.py::test_every_study_file_runs_on_the_simulator[resnet50-offload.toml]",
    "tests/test_tune.py::test_every_study_file_runs_on_the_simulator[concurrent-googlenet-resnet50-orin.toml]",
    "tests/test_deploy.py::test_build_then_run_a_pipeline_plan",
    "tests/test_optuna_study.py::test_sigint_with_the_optuna_agent_leaves_no_traceback_and_no_fail_trial",
    "tests/test_search.py::test_agent_reproducible_with_seed[guided]",
    "tests/test_deploy.py::test_engine_and_replicas_plans_run_and_match_the_model",
    "tests/test_trt_pipeline.py::test_second_placement_reuses_cached_segment_engines",
    "tests/test_cli_check.py::test_bad_input_is_one_line",
    "tests/test_tune_tensorrt.py::test_guided_against_the_tensorrt_fakes_stores_and_fits_segment_profiles",
    "tests/test_remeasure.py::test_tune_says_it_re_measured_and_its_summary_uses_the_combined_figures",
    "tests/test_deploy.py::test_calibration_cache_reaches_tune_and_measure_builds",
    "tests/test_search.py::test_guided_beats_random_and_local_on_a_profiled_device",
    "tests/test_placement.py::test_segments_partition_and_are_convex",
    "tests/test_trtexec.py::test_guided_agent_fits_trtexec_measurements",
    "tests/test_tune.py::test_every_study_file_runs_on_the_simulator[concurrent-alexnet-resnet101-xavier.toml]",
    "tests/test_search.py::test_agent_respects_masks_and_budget[guided]",
    "tests/test_search.py::test_guided_fits_the_run_and_shows_predictions",
    "tests/test_tune.py::test_a_study_made_with_the_old_defaults_keeps_resuming",
    "tests/test_plan_folder.py::test_export_headline_is_tunes_summary_figure[energy]",
    "tests/test_incremental.py::test_steady_state_is_the_fixed_point_bisection_finds",
    "tests/test_trt_pipeline.py::test_gate_uses_a_different_input_per_slot_and_catches_a_slot_race",
    "tests/test_tune.py::test_jetson_template_runs_with_the_simulator_and_an_onnx_file",
    "tests/test_trt_pipeline.py::test_throughput_is_the_steady_state_period_not_fill_and_drain",
    "tests/test_tune.py::test_mismatched_settings_on_resume_name_the_setting",
    "tests/test_plan_folder.py::test_export_headline_is_tunes_summary_figure[latency]",
    "tests/test_trt_pipeline.py::test_three_branch_plan_runs_as_concurrent_engines[8.5.2]",
    "tests/test_optuna_study.py::test_tune_writes_an_optuna_study_of_the_same_name[optuna]",
    "tests/test_trt_pipeline.py::test_three_branch_plan_runs_as_concurrent_engines[10.3.0]",
    "tests/reliability/test_onnx_fuzz.py::test_mutated_models_import_or_are_refused",
    "tests/test_tune.py::test_sigint_with_any_agent_leaves_no_traceback_and_no_fail_trial[local]",
}


def pytest_configure(config):  # noqa: ARG001 - pytest hook
    """Every seed of this run is drawn before any test runs and kept in the environment, which the
    pytest-xdist workers (started later) and every subprocess inherit: one set of seeds per run."""
    from tests.seeds import replay_line

    replay_line()
    _one_blas_thread()


def _one_blas_thread() -> None:
    """numpy's and scipy's BLAS run one thread in the test processes, as a search agent's solves run in
    ``placetune tune`` (placetune/tuning/blas.py: the threads of a small solve only spin). Tests that run
    an agent directly ran a thread per core: a guided run of 20 evaluations on GoogLeNet took 35 s (13 s of
    CPU) on 2 cores, 11 s (4.7 s) with one thread, with the same result; with two pytest-xdist workers
    on 2 cores the spinning threads also take the other worker's CPU. Subprocesses keep their defaults."""
    try:
        import numpy  # noqa: F401 - loads the BLAS that is limited
        import scipy.linalg  # noqa: F401 - scipy's own BLAS
        from threadpoolctl import threadpool_limits
    except ImportError:  # threadpoolctl and scipy come with placetune; the limit only saves time
        return
    threadpool_limits(limits=1, user_api="blas")


def _distributed(config) -> bool:
    """Whether the tests run in pytest-xdist workers (``-n N``; this process is the controller or a worker)."""
    return hasattr(config, "workerinput") or bool(getattr(config.option, "numprocesses", None))


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid in SLOW:
            item.add_marker(pytest.mark.slow)
    if _distributed(config):
        # The slowest tests start first, so that no worker is left with one of them at the end while the
        # others wait (every worker collects the same order; the sort is stable, so the rest keep theirs).
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_report_header(config):  # noqa: ARG001 - pytest hook
    """This run's seeds (tests/seeds.py: fresh every run, replayed from the environment)."""
    from tests.seeds import replay_line

    return replay_line()


def pytest_sessionfinish(session):
    """A pytest-xdist worker hands what the reliability suite counted to the controller, which prints it.
    The controller fails a run that left a new file in the checkout's root (run the suite without -n to
    learn which test wrote it)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is None and _distributed(session.config):
        written = sorted(_root_files() - _ROOT_AT_START)
        if written:
            session.config.get_terminal_writer().line(
                f"a test wrote into the checkout's root: {', '.join(written)} (run without -n to learn which)",
                red=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if workeroutput is not None:
        from tests.reliability._harness import COUNTS, NOTES

        workeroutput["placetune_reliability"] = {"counts": dict(COUNTS), "notes": list(NOTES)}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):  # noqa: ARG001 - pytest-xdist hook (the controller)
    from tests.reliability._harness import COUNTS, NOTES

    done = getattr(node, "workeroutput", {}).get("placetune_reliability")
    if done:
        COUNTS.update(done["counts"])
        NOTES.extend(done["notes"])


def pytest_terminal_summary(terminalreporter):
    from tests.reliability._harness import summary_lines
    from tests.seeds import replay_line

    lines = summary_lines()
    if lines:
        terminalreporter.write_sep("-", "placetune reliability suite")
        for line in lines:
            terminalreporter.write_line(line)
    terminalreporter.write_line(replay_line())


_ROOT = Path(__file__).resolve().parent.parent


def _root_files() -> set[str]:
    """The checkout's top-level files (not folders, not dot files)."""
    return {e.name for e in os.scandir(_ROOT) if e.is_file(follow_symlinks=False) and not e.name.startswith(".")}


_ROOT_AT_START = _root_files()


@pytest.fixture(autouse=True)
def _leaves_the_checkout_alone(request):
    """A test that leaves a new file in the checkout's root (a plan, a study database: a command run in
    the working directory) fails and names it: such a file once got committed with an unrelated change.
    Only new files count, so editing the README while the suite runs fails nothing. Under pytest-xdist
    the workers share the root, so the run as a whole is judged instead (pytest_sessionfinish)."""
    if _distributed(request.config):
        yield
        return
    before = _root_files()
    yield
    written = sorted(_root_files() - before)
    if written:
        pytest.fail(f"the test wrote into the checkout's root: {', '.join(written)} (run it in tmp_path)")
