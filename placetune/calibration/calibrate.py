"""``placetune calibrate``: fit a device profile to the stored measurements of one or more studies.

The studies must share one device fingerprint (one machine, one TensorRT, one power mode):
mixing devices would fit an average of them. Nothing stored is changed; the result is a
device profile (TOML) that ``--device-profile`` makes the simulated backend measure with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from placetune.calibration.fit import MIN_MEASUREMENTS, FitResult, fit_profile, observations
from placetune.errors import ConfigError
from placetune.files.write import check_output, force_hint, read_head, refuse_inputs, user_output, write_file
from placetune.validate import integer
from placetune.hardware.platforms import get_platform
from placetune.tuning.study_model import load_study_model
from placetune.settings import stored_settings
from placetune.store.store import Store
from placetune.store.url import sqlite_file

__all__ = ["calibrate", "write_profile"]


#: The first line of every device profile :func:`profile_text` writes begins so.
_HEADER = "# device profile fitted by placetune calibrate"


def is_profile_file(path: str | Path) -> bool:
    """True when ``path`` is a device profile ``placetune calibrate`` wrote (its header line)."""
    try:
        return read_head(path, len(_HEADER)) == _HEADER.encode()
    except (OSError, ValueError):
        return False


def write_profile(result: FitResult, path: str | Path, studies: Sequence[str] = (), *, force: bool = True) -> None:
    """Write ``result.profile`` as TOML with a header that says where it comes from (atomically; a link or
    /dev/stdout written through). ``force``: False replaces only an earlier profile, an empty file, a device
    or a pipe (``calibrate -o`` without ``--force``)."""
    write_file(Path(path), profile_text(result, studies), "device profile", owned=user_output(force, is_profile_file),
               hint=force_hint("-o"))


def profile_text(result: FitResult, studies: Sequence[str] = ()) -> str:
    """``result.profile`` as TOML, with a header saying which studies it was fitted to and how well."""
    head = [f"{_HEADER} from {', '.join(studies) or 'measurements'}",
            f"# {result.measurements} measurements; cross-validated median error "
            + (f"{100 * result.cross_validated['median']:.2f} %" if result.cross_validated else "not run"),
            f"# unidentified (left at their prior): {', '.join(result.unidentified) or 'none'}", ""]
    return "\n".join(head) + result.profile.to_toml()


def calibrate(study: str, storage: str = "sqlite:///placetune.db", *, studies: Sequence[str] = (),
              output: str | Path | None = None, force: bool = True, **fit_options) -> FitResult:
    """Fit a device profile to the measurements of ``study`` (and ``studies``) in ``storage``.

    Args:
        study: a study name.
        storage: the store (SQLAlchemy URL or SQLite path).
        studies: more studies of the same device (same fingerprint), e.g. other models.
        output: write the profile (TOML) here.
        force: replace ``output`` whatever it is; False: only an earlier profile (see :func:`write_profile`).
        **fit_options: passed to :func:`~placetune.calibration.fit.fit_profile`.

    Raises:
        UnknownNameError: no such study. StoreError: the database cannot be read.
        ConfigError: studies of different fingerprints or platforms, or fewer than
            :data:`~placetune.calibration.fit.MIN_MEASUREMENTS` usable measurements.
    """
    folds = fit_options.get("cross_validate", 5)
    if integer(folds, "folds", 0, 1000) == 1:  # -1 or 1 silently meant "no cross-validation"
        raise ConfigError("folds must be 0 (no cross-validation) or an integer from 2 to 1000, got 1")
    if output is not None:  # refused before the fit, not after
        refuse_inputs(output, "-o/--output", [("the database (--storage)", sqlite_file(storage))])
        check_output(output, "device profile", owned=user_output(force, is_profile_file), hint=force_hint("-o"))
    names = list(dict.fromkeys([study, *studies]))
    with Store(storage, readonly=True) as store:  # only read: never created, given tables or upgraded
        records = [store.study(n) for n in names]
        first = records[0]
        for rec in records[1:]:
            if rec.fingerprint_hash != first.fingerprint_hash or rec.platform != first.platform:
                raise ConfigError(
                    f"studies {first.name!r} ({first.platform}, {first.backend}, fingerprint "
                    f"{first.fingerprint_hash[:12]}) and {rec.name!r} ({rec.platform}, {rec.backend}, fingerprint "
                    f"{rec.fingerprint_hash[:12]}) measured different devices; calibrate one device at a time")
        platform = get_platform(first.platform)
        obs, seen, model0, settings0 = [], set(), None, None
        for rec in records:
            if rec.mode not in ("engine", "pipeline"):
                continue
            model = load_study_model(store, rec)
            settings = stored_settings(rec.settings)
            ms = [r for r in store.measurements(rec.name, status="ok") if r.id not in seen]
            seen.update(r.id for r in ms)
            obs += observations(model, platform, settings, ms)
            model0, settings0 = model0 or model, settings0 or settings
        groups = len({o.group for o in obs})
        if groups < MIN_MEASUREMENTS or model0 is None:
            raise ConfigError(
                f"calibration needs at least {MIN_MEASUREMENTS} successful engine- or pipeline-mode measurements; "
                f"{', '.join(repr(n) for n in names)} {'have' if len(names) > 1 else 'has'} {groups}: "
                f"measure more placements (placetune tune --study {names[0]})")
    result = fit_profile(model0, platform, settings0, [], observations_=obs, **fit_options)
    if output is not None:
        write_profile(result, output, names, force=force)
    return result
