"""``placetune calibrate`` / fit_profile: learning a device profile from stored measurements."""

from __future__ import annotations

import hashlib
import json
import sqlite3

import numpy as np
import pytest

from placetune import DeviceProfile, Evaluator, Placement, calibrate, fit_profile, load_device_profile
from placetune.backends.simulate.simulator import SimulatedJetson
from placetune.cli.main import main
from placetune.errors import ConfigError

TRUTH = DeviceProfile("orin-agx", gpu=0.8, dla=1.3, boundary=2.0, engine_us=80.0,
                      op_class={"gpu.conv": 1.15, "dla.pool": 1.5, "dla.eltwise": 0.7})


def _stages(names, rng):
    """A random placement of 1-4 contiguous stages, each on one device."""
    k = int(rng.integers(1, 5))
    cuts = [0] + sorted(rng.choice(np.arange(1, len(names)), size=k - 1, replace=False).tolist()) + [len(names)]
    devs = rng.choice(["GPU", "DLA0", "DLA1"], size=k)
    return {n: str(devs[j]) for j in range(k) for n in names[cuts[j]:cuts[j + 1]]}


def _study(store, name, profile, n, mode="pipeline", model="resnet18", seed=0):
    kw = {"frames_in_flight": 4} if mode == "pipeline" else {}
    ev = Evaluator(model, "orin-agx", SimulatedJetson(profile=profile), mode=mode, precision="int8", batch=2,
                   objective="throughput", store=store, study=name, **kw)
    rng = np.random.default_rng(seed)
    ms = []
    while len(ms) < n:
        m = ev.evaluate(Placement(ev.model, _stages(ev.model.names, rng)))
        if m.ok:
            ms.append(m)
    return ev, ms


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("cal") / "cal.db"
    url = f"sqlite:///{path}"
    _study(str(path), "truth-pipe", TRUTH, 40)
    _study(str(path), "truth-engine", TRUTH, 12, mode="engine", seed=1)
    _study(str(path), "nominal", None, 12, seed=2)
    _study(str(path), "tiny", TRUTH, 3, seed=3)
    return path, url


def _digest(path):
    """Hash of the database's content (a WAL checkpoint may rewrite the file's bytes)."""
    with sqlite3.connect(path) as conn:
        return hashlib.sha256("\n".join(conn.iterdump()).encode()).hexdigest()


@pytest.mark.parametrize("mode", ["pipeline", "engine"])
def test_fit_recovers_an_in_family_profile(mode):
    ev, ms = _study(None, None, TRUTH, 30, mode=mode)
    r = fit_profile(ev.model, ev.platform, ev.settings, ms)
    assert r.cross_validated["median"] <= 0.03 and r.cross_validated["n"] == 30
    assert r.in_sample["median"] <= 0.03
    p = r.profile
    assert p.dla == pytest.approx(1.3, rel=0.1) and p.boundary == pytest.approx(2.0, rel=0.15)
    assert p.engine_us == pytest.approx(80.0, abs=20.0)
    # what the simulator sees of the GPU: gpu x the conv class factor
    assert p.gpu * p.op_class.get("gpu.conv", 1.0) == pytest.approx(0.8 * 1.15, rel=0.05)
    # the nominal simulator is far off on the same placements: the fit is what closes the gap
    nominal = fit_profile(ev.model, ev.platform, ev.settings, ms, ridge=1e6, layer_shrinkage=1e6)
    assert nominal.cross_validated["median"] > 0.05


def test_fit_without_layer_times_uses_segments_only():
    ev, ms = _study(None, None, TRUTH, 30)
    r = fit_profile(ev.model, ev.platform, ev.settings, ms, layer_weight=0.0)
    assert r.cross_validated["median"] <= 0.03


def test_fast_fit_and_bootstrap_differ_but_agree_roughly():
    ev, ms = _study(None, None, TRUTH, 24)
    fast = fit_profile(ev.model, ev.platform, ev.settings, ms, fast=True)
    assert fast.cross_validated == {} and fast.profile.contention == 1.0
    a = fit_profile(ev.model, ev.platform, ev.settings, ms, fast=True, bootstrap_seed=1).profile
    b = fit_profile(ev.model, ev.platform, ev.settings, ms, fast=True, bootstrap_seed=2).profile
    assert a != b and a.dla == pytest.approx(b.dla, rel=0.1)


def test_unidentified_parameters_are_reported():
    """All-GPU measurements only: nothing tells the fit about the DLA, boundaries or loadables."""
    ev = Evaluator("resnet18", "orin-agx", SimulatedJetson(profile=TRUTH), mode="engine", precision="int8", batch=2)
    m = ev.evaluate(Placement.all_gpu(ev.model))
    r = fit_profile(ev.model, ev.platform, ev.settings, [m] * 8, cross_validate=0)
    assert {"dla", "boundary", "loadable"} <= set(r.unidentified) and "gpu" not in r.unidentified
    assert r.profile.dla == pytest.approx(1.0, abs=0.05)
    assert "unidentified: " in r.table() and "dla" in r.table().split("unidentified: ")[1]


def test_calibrate_cli_writes_a_profile_that_reproduces_the_device(db, tmp_path, capsys):
    path, url = db
    before = _digest(path)
    out = tmp_path / "my-device.toml"
    assert main(["calibrate", "--study", "truth-pipe", "--storage", url, "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "cross-validated (5-fold)" in text and "in-sample" in text and "unidentified" in text
    prof = load_device_profile(out)
    assert prof.dla == pytest.approx(1.3, rel=0.1)
    assert _digest(path) == before  # nothing stored changed
    # several studies of one device (pipeline + engine measurements)
    from placetune.store.store import Store

    with Store(url) as s:
        stored = {r.id for n in ("truth-pipe", "truth-engine") for r in s.measurements(n, status="ok")}
    r = calibrate("truth-pipe", url, studies=["truth-engine"])
    assert r.measurements == len(stored) > 30 and r.cross_validated["median"] <= 0.03
    # the fitted profile measures like the device on a placement the fit never saw
    ev_true, _ = _study(None, None, TRUTH, 1, seed=99)
    ev_fit = Evaluator("resnet18", "orin-agx", SimulatedJetson(profile=prof), mode="pipeline", precision="int8",
                       batch=2, frames_in_flight=4)
    pl = {n: ("DLA0" if i < 30 else "GPU") for i, n in enumerate(ev_true.model.names)}
    a = ev_true.evaluate(Placement(ev_true.model, pl)).throughput_fps
    b = ev_fit.evaluate(Placement(ev_fit.model, pl)).throughput_fps
    assert b == pytest.approx(a, rel=0.03)
    assert main(["calibrate", "--study", "truth-pipe", "--storage", url, "--json", "--folds", "0"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cross_validated"] == {} and doc["profile"]["base"] == "orin-agx"


@pytest.mark.parametrize("argv, code, words", [
    (["--study", "tiny"], 6, "needs at least 8 successful"),
    (["--study", "truth-pipe", "--study", "nominal"], 6, "measured different devices"),
    (["--study", "no-such-study"], 4, "no-such-study"),
])
def test_calibrate_errors_are_one_line_and_change_nothing(db, tmp_path, capsys, argv, code, words):
    path, url = db
    before = _digest(path)
    out = tmp_path / "never.toml"
    assert main(["calibrate", *argv, "--storage", url, "-o", str(out)]) == code
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists() and _digest(path) == before


def test_measure_and_tune_take_a_device_profile(tmp_path, capsys):
    prof = tmp_path / "dev.toml"
    prof.write_text(DeviceProfile("orin-agx", dla=2.0).to_toml())
    base = ["measure", "resnet18", "--precision", "int8", "--placement", "all-dla", "--json"]
    assert main(base) == 0
    nominal = json.loads(capsys.readouterr().out)
    assert main([*base, "--device-profile", str(prof)]) == 0
    slow = json.loads(capsys.readouterr().out)
    assert slow["latency_ms"]["median"] > 1.5 * nominal["latency_ms"]["median"] and slow["simulated"]
    bad = tmp_path / "bad.toml"
    bad.write_text('base = "orin-agx"\n[scale]\ndla = -1\n')
    assert main([*base, "--device-profile", str(bad)]) == 6
    err = capsys.readouterr().err
    assert "bad.toml: device profile: scale.dla must be > 0" in err and err.count("\n") == 1
    assert main([*base, "--backend", "trtexec", "--device-profile", str(prof)]) == 6
    assert "applies to --backend simulate" in capsys.readouterr().err
    study = tmp_path / "s.toml"
    study.write_text(f'[study]\nmodel = "resnet18"\nprecision = "int8"\ntrials = 3\nagent = "random"\n'
                     f'device_profile = "{prof.name}"\n')
    db = tmp_path / "t.db"
    assert main(["tune", str(study), "--storage", str(db), "--export", str(tmp_path / "p.json")]) == 0
    capsys.readouterr()
    from placetune.store.store import Store

    with Store(str(db)) as s:
        (rec,) = s.studies()
        assert rec.fingerprint["profile"] == load_device_profile(prof).digest() and "profile" in rec.name


def test_a_search_fits_its_first_few_measurements_too():
    """The guided agent's refits needed 8 measurements (calibrate's minimum): its first rounds
    searched the uncorrected simulator, e.g. 6 more builds near all-DLA0 after all-DLA0 had
    measured three times slower than predicted. Below 8 it now fits linearly on the priors."""
    from search.surrogate import fit_ensemble

    slow = DeviceProfile("orin-agx", dla=2.5)
    ev, ms = _study(None, None, slow, 4, mode="engine", seed=4)
    fit = fit_ensemble(ev, ms, ensemble=0)
    assert fit.profile is not None and fit.cv_error is None and fit.n == 4
    assert 1.5 < fit.profile.dla < 3.0  # most of the way from the nominal 1.0, held back by the prior
    with pytest.raises(ConfigError, match="needs at least 8"):  # calibrate keeps its minimum
        fit_profile(ev.model, ev.platform, ev.settings, ms)


def test_a_search_fit_reports_the_fitters_cross_validated_error():
    """The guided agent's model error is the calibration fit's own cross-validated median; a fit
    asked not to cross-validate reports none rather than a guess."""
    from search.surrogate import fit_ensemble

    ev, ms = _study(None, None, DeviceProfile("orin-agx", dla=2.5), 12, mode="engine", seed=4)
    fit = fit_ensemble(ev, ms, ensemble=0)
    own = fit_profile(ev.model, ev.platform, ev.settings, ms)
    assert fit.cv_error == own.cross_validated["median"] and fit.cv_error is not None
    assert fit_ensemble(ev, ms, ensemble=0, cross_validate=0).cv_error is None
