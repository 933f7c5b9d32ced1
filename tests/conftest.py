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


#: The slowest tests, with their seconds in a whole run on 16 CPUs (``pytest -n 16 --dist worksteal
#: --durations=0 --junitxml``, setup and teardown included; 2026-11-29): every test of 7 s or more there,
#: and those an earlier run had listed (over 9 s then). ``-m "not slow"`` leaves them out, like the tests
#: marked ``@pytest.mark.slow`` in their files. Under pytest-xdist they start first, longest first, so that
#: no worker is left running a long one at the end while the others wait; the figures only order them.
SLOW = {
    # marked slow in its file; not run in that 16-CPU run (no mypy there): 45 s of CPU for a cold
    # `mypy placetune search` (fresh cache directory, as in a fresh clone), on one core the longest test
    "tests/test_lint.py::test_mypy_is_clean": 45.0,
    "tests/test_detector_e2e.py::test_real_export_check_tune_export_build_run[yolov8s-seg]": 41.6,
    "tests/test_selftest.py::test_a_locked_board_that_throttles_passes_with_the_throttling_said": 34.0,
    "tests/test_rl_example.py::test_maskable_ppo_beats_all_gpu_and_prints_the_comparison_with_guided": 28.9,
    "tests/reliability/test_onnx_fuzz.py::test_onnx_backend_test_models": 26.4,
    "tests/test_selftest.py::test_an_unlocked_board_whose_timings_disagree_exits_0_marked_not_verified": 25.3,
    "tests/test_tune.py::test_every_study_file_runs_on_the_simulator[concurrent-googlenet-resnet50-orin.toml]": 24.1,
    "tests/test_deploy.py::test_the_deploy_example_runs_end_to_end_against_the_doubles": 23.5,
    "tests/test_constraints.py::test_constrained_tune_exports_a_plan_that_meets_the_bound": 23.3,
    "tests/test_constraints.py::test_every_agent_returns_the_best_feasible[guided-kw2-20]": 23.2,
    "tests/test_tune.py::test_every_study_file_runs_on_the_simulator[multi-camera.toml]": 23.0,
    "tests/test_search_later.py::test_tune_stops_after_convergence_unless_told_to_use_the_whole_budget": 21.5,
    "tests/test_selftest.py::test_green_against_the_doubles_on_every_module_and_version": 20.6,
    "tests/test_concurrent.py::test_tune_concurrent_reports_naive_baselines_and_exports_every_network": 19.7,
    "tests/test_deploy.py::test_the_deploy_example_runs_a_network_whose_input_is_not_named_input": 19.7,
    "tests/reliability/test_kill.py::test_sigkill_at_random_points_loses_nothing": 19.1,
    "tests/test_cuda_double.py::test_the_gpu_test_file_passes_against_the_doubles_and_its_broken_schedules_fail": 18.9,
    "tests/test_first_hour_cli.py::test_measure_studies_export_and_report_fit_an_80_column_terminal_and_logs_are_unchanged": 18.5,
    "tests/test_detector_e2e.py::test_real_export_check_tune_export_build_run[yolo11n]": 17.7,
    "tests/test_tune.py::test_every_study_file_runs_on_the_simulator[googlenet-energy-bound.toml]": 17.5,
    "tests/test_tune.py::test_every_study_file_runs_on_the_simulator[resnet50-offload.toml]": 17.5,
    "tests/test_detector_e2e.py::test_real_export_check_tune_export_build_run[yolov8n]": 16.7,
    "tests/test_tune.py::test_embedded_default_runs_and_resumes": 16.4,
    "tests/test_tune_tensorrt.py::test_guided_against_the_tensorrt_fakes_stores_and_fits_segment_profiles": 16.1,
    "tests/test_examples.py::test_the_readme_agents_comparison_block_prints_what_the_readme_says": 14.6,
    "tests/test_search_later.py::test_a_noisy_settled_study_resumed_starts_from_all_its_measurements": 14.5,
    "tests/test_cuda_layer.py::test_a_thousand_pipeline_jobs_leave_memory_flat[cuda-python]": 14.4,
    "tests/test_selftest.py::test_a_board_whose_timings_drift_between_runs_passes_but_says_so": 13.8,
    "tests/test_constraints.py::test_export_and_studies_of_a_constrained_study_rank_feasible_first": 13.7,
    "tests/test_runtime_standalone.py::test_the_standalone_runtime_runs_a_plan_without_onnx_optuna_sqlalchemy_or_placetune": 13.6,
    "tests/test_trtexec.py::test_guided_agent_fits_trtexec_measurements": 13.0,
    "tests/test_deploy.py::test_build_then_run_a_pipeline_plan": 12.7,
    "tests/test_selftest.py::test_an_agx_orin_kit_emulating_an_orin_nx_8gb_is_not_failed_for_the_kit_s_second_dla": 12.7,
    "tests/test_selftest.py::test_no_power_rails_leave_the_selftest_green_and_say_energy_is_unavailable": 11.7,
    "tests/test_night.py::test_selftest_input_data_for_its_own_network_is_timed_in_every_check": 11.7,
    "tests/test_selftest.py::test_a_module_placetune_cannot_identify_is_checked_with_the_profile_named_by_platform": 11.5,
    "tests/test_input_data.py::test_the_selftest_times_on_the_data_and_says_so": 11.5,
    "tests/test_trt_pipeline.py::test_repeated_jobs_leave_no_cuda_resources_behind[pycuda]": 11.2,
    "tests/test_cli_output.py::test_the_summary_writes_every_count_alike": 10.8,
    "tests/test_selftest.py::test_the_second_timing_runs_on_the_board_when_the_first_disagrees": 10.8,
    "tests/test_segment_known.py::test_the_command_the_plan_gives_for_a_passed_over_plan_re_measures_it[False]": 10.8,
    "tests/test_selftest.py::test_the_checks_apply_the_dla_rules_of_the_boards_own_tensorrt_as_a_tune_does": 10.6,
    "tests/test_run_end.py::test_an_api_run_records_its_final_pick_and_verdict_with_the_attached_optuna_study": 10.6,
    "tests/test_selftest.py::test_a_second_timing_of_another_build_is_paired_only_with_its_own_engine": 10.5,
    "tests/test_selftest.py::test_the_report_holds_each_dla_engines_layer_information_and_placement_lines": 10.3,
    "tests/test_deploy.py::test_calibration_cache_reaches_tune_and_measure_builds": 10.2,
    "tests/test_deploy_plans.py::test_a_plan_with_a_faster_plan_not_exported_builds_the_exported_placement": 10.0,
    "tests/test_selftest.py::test_placed_by_layer_information_without_placement_lines_is_green_and_a_dla_check_on_the_gpu_red": 10.0,
    "tests/test_selftest.py::test_a_wrong_cut_run_that_failed_for_another_reason_is_not_counted_as_caught": 9.9,
    "tests/test_search.py::test_agent_reproducible_with_seed[guided]": 9.9,
    "tests/test_selftest.py::test_unlocked_clocks_are_a_setup_step_named_loudly_not_a_failure_of_the_stack": 9.8,
    "tests/test_search_later.py::test_a_settled_study_run_again_builds_nothing_and_says_so_in_one_line": 9.8,
    "tests/test_deploy.py::test_engine_and_replicas_plans_run_and_match_the_model": 9.8,
    "tests/test_segment_known.py::test_the_command_the_plan_gives_for_a_passed_over_plan_re_measures_it[True]": 9.8,
    "tests/test_tune.py::test_sigint_stops_cleanly_and_resume_finishes_budget": 9.7,
    "tests/test_search_later.py::test_by_default_the_whole_budget_is_spent_and_the_stopped_run_is_no_worse": 9.6,
    "tests/test_optuna_study.py::test_sigint_with_the_optuna_agent_leaves_no_traceback_and_no_fail_trial": 9.1,
    "tests/test_detector_e2e.py::test_real_export_check_tune_export_build_run[yolov8n-efficientnms]": 8.9,
    "tests/test_golden.py::test_the_default_tune_prints_the_golden_trial_lines": 8.7,
    "tests/test_examples.py::test_every_example_run_as_a_script_prints_what_it_did": 8.5,
    "tests/test_trt_pipeline.py::test_every_input_copy_on_cuda_python_reads_pinned_memory": 8.5,
    "tests/test_search_later.py::test_an_interrupted_study_that_had_not_converged_resumes_and_builds": 8.5,
    "tests/test_trt_pipeline.py::test_repeated_jobs_leave_no_cuda_resources_behind[cuda-python]": 8.0,
    "tests/test_clock_watch.py::test_the_selftest_says_in_one_line_that_trtexecs_time_of_the_engine_is_not_trusted": 7.9,
    "tests/test_search.py::test_guided_beats_random_and_local_on_a_profiled_device": 7.9,
    "tests/test_tune_tensorrt.py::test_tune_with_the_tensorrt_backend[10.3.0]": 7.9,
    "tests/test_fuzz.py::test_storage_urls": 7.8,
    "tests/test_first_hour_cli.py::test_a_tune_in_an_80_column_terminal_ends_in_lines_that_fit": 7.8,
    "tests/test_tune_tensorrt.py::test_tune_with_the_tensorrt_backend[8.5.2]": 7.6,
    "tests/test_clock_watch.py::test_pipeline_and_replicas_jobs_judge_the_clocks_around_their_timed_part[pipeline]": 7.6,
    "tests/test_trtexec_board.py::test_the_profiling_run_counts_in_the_timing_runs_limit": 7.5,
    "tests/test_first_hour_cli.py::test_a_tune_in_a_terminal_says_when_and_why_it_converged_as_it_happens": 7.5,
    "tests/test_segment_known.py::test_a_partly_unread_best_plan_exports_the_best_known_one_and_names_the_faster": 7.4,
    "tests/test_trt_pipeline.py::test_second_placement_reuses_cached_segment_engines": 7.4,
    "tests/test_selftest.py::test_a_pipeline_gate_whose_reference_ignores_its_input_is_red": 7.4,
    "tests/test_fuzz.py::test_study_files": 7.3,
    "tests/test_tune_tensorrt.py::test_tune_with_the_tensorrt_backend[8.6.2]": 7.2,
    "tests/test_first_hour_walk.py::test_a_throughput_summary_says_its_best_frame_takes_longer_than_all_gpus": 7.1,
    "tests/test_segment_known.py::test_a_best_whose_placement_was_not_read_is_marked_not_exportable_wherever_it_is_named": 7.0,
    "tests/test_tune.py::test_every_study_file_runs_on_the_simulator[concurrent-alexnet-resnet101-xavier.toml]": 6.1,
    "tests/test_search.py::test_agent_respects_masks_and_budget[guided]": 5.7,
    "tests/test_tune.py::test_jetson_template_runs_with_the_simulator_and_an_onnx_file": 5.6,
    "tests/test_tune.py::test_mismatched_settings_on_resume_name_the_setting": 5.4,
    "tests/test_incremental.py::test_steady_state_is_the_fixed_point_bisection_finds": 5.1,
    "tests/reliability/test_onnx_fuzz.py::test_mutated_models_import_or_are_refused": 5.0,
    "tests/test_plan_folder.py::test_export_headline_is_tunes_summary_figure[latency]": 5.0,
    "tests/test_trt_pipeline.py::test_throughput_is_the_steady_state_period_not_fill_and_drain": 4.9,
    "tests/test_placement.py::test_segments_partition_and_are_convex": 4.7,
    "tests/test_cli_check.py::test_bad_input_is_one_line": 4.6,
    "tests/reliability/test_faults.py::test_disk_full_rlimit_clear_error_rows_intact": 4.3,
    "tests/reliability/test_faults.py::test_disk_full_tmpfs_clear_error_rows_intact": 4.2,
    "tests/test_plan_folder.py::test_export_headline_is_tunes_summary_figure[energy]": 4.2,
    "tests/test_trt_pipeline.py::test_gate_uses_a_different_input_per_slot_and_catches_a_slot_race": 4.1,
    "tests/test_search.py::test_guided_fits_the_run_and_shows_predictions": 3.3,
    "tests/test_tune.py::test_sigint_with_any_agent_leaves_no_traceback_and_no_fail_trial[local]": 3.3,
    "tests/test_trt_pipeline.py::test_three_branch_plan_runs_as_concurrent_engines[10.3.0]": 3.2,
    "tests/test_trt_pipeline.py::test_three_branch_plan_runs_as_concurrent_engines[8.5.2]": 3.1,
    "tests/test_remeasure.py::test_tune_says_it_re_measured_and_its_summary_uses_the_combined_figures": 3.0,
    "tests/test_optuna_study.py::test_tune_writes_an_optuna_study_of_the_same_name[optuna]": 2.5,
    "tests/test_tune.py::test_a_study_made_with_the_old_defaults_keeps_resuming": 1.9,
    "tests/test_constraints.py::test_agents_that_start_from_baselines_find_a_feasible_plan": 1.6,
}


def pytest_configure(config):  # noqa: ARG001 - pytest hook
    """Every seed of this run is drawn before any test runs and kept in the environment, which the
    pytest-xdist workers (started later) and every subprocess inherit: one set of seeds per run."""
    from tests.seeds import replay_line

    replay_line()
    _one_blas_thread()
    _ctrl_c_as_from_a_terminal()


def _ctrl_c_as_from_a_terminal() -> None:
    """The tests press Ctrl-C as a terminal does: SIGINT raises KeyboardInterrupt in the test processes and
    every ``placetune`` they start. A suite started in the background of a script (``.ci/run > log &``)
    inherits SIGINT ignored, and ``placetune tune`` rightly keeps a signal ignored at its start (a shell's
    background command, nohup's SIGHUP), so those tests would press a key nobody listens to."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _one_blas_thread() -> None:
    """numpy's and scipy's BLAS run one thread in the test processes, as a search agent's solves run in
    ``placetune tune`` (placetune/tuning/blas.py: the threads of a small solve only spin). Tests that run
    an agent directly ran a thread per core: a guided run of 20 evaluations on GoogLeNet took 35 s (13 s of
    CPU) on 2 cores, 11 s (4.7 s) with one thread, with the same result; with two pytest-xdist workers
    on 2 cores the spinning threads also take the other worker's CPU.

    Subprocesses (a ``placetune`` command, the TensorRT worker, an example) get ``OPENBLAS_NUM_THREADS=1``
    (numpy's and scipy's OpenBLAS read it when they load; one set by the caller is kept): the doubles'
    matrix products of each frame ran two spinning threads beside the other worker, and the deploy example
    and pipeline leak tests took 29.0 s of CPU with them, 22.0 s without (2 shared cores, 2026-11-29)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
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
        # The slowest tests start first, longest first (a test marked slow in its file without a figure
        # here after those with one), so that no worker is left with one of them at the end while the others
        # wait (every worker collects the same order; the sort is stable, so the rest keep theirs).
        items.sort(key=lambda item: (item.get_closest_marker("slow") is None, -SLOW.get(item.nodeid, 0.0)))


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
