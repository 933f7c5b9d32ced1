"""Write docs/architecture.md from the modules' own one-line docstrings."""
import ast, sys
from pathlib import Path
root = Path(sys.argv[1] if len(sys.argv) > 1 else '.')
out = ["# Architecture", "",
       "placetune's folders follow the data flow: an ONNX file becomes a `model`; a `placement` maps its",
       "layers to GPU/DLA0/DLA1 and `realise` applies the `hardware`'s DLA rules (what TensorRT would",
       "really run); the `tuning.evaluator` sends the realised placement to a `backend` (the simulated",
       "Jetson, TensorRT or trtexec), which returns a `Measurement`; the `store` keeps every measurement;",
       "`plan` exports the best one; `report` draws it; `cli` and `envs` are the two front doors, and",
       "`search/` holds the agents that drive the evaluator.", "",
       "Rules, checked by `tests/test_architecture.py` (a plain AST walk): no module over 600 lines;",
       "no import cycle, imports inside functions included; `model` < `hardware` < `placement` never",
       "import upwards; every module opens with a docstring that says what it is for; `import placetune`",
       "loads no tensorrt, pycuda, matplotlib, optuna, sqlalchemy or onnx (its public names are imported on",
       "first use). The TensorRT worker (`backends/tensorrt/worker*.py`)",
       "imports nothing of placetune: it runs as a file under a Jetson's system Python 3.8.", "",
       "Regenerate this page with `python docs/architecture.py` after adding a module.", "",
       "## The search loop: ask/tell", "",
       "The study drives the agents (`search/asktell.py`): an agent's run is asked for proposals",
       "(`ask()`: placements to evaluate, build again, or the baseline) and told their measurements",
       "(`tell()`); the study alone calls `Evaluator.evaluate()` (`search.drive`, used by",
       "`tuning/tune.py` and by `Agent.run`). Agents written as loops (every built-in agent) keep",
       "their algorithm: `LoopAskTell` runs the loop as a coroutine against a view of the evaluator",
       "whose measuring calls are proposals; agents written step by step subclass `StepAgent`",
       "(`search/steps.py`: batches, budget, answers from the study). Agents are registered with",
       "`search.register_agent` or a package's `placetune.agents` entry point. See docs/search.md.", "",
       "## Extension points", "",
       "**A new backend** (what measures a realised placement) derives from",
       "`placetune.BackendBase` (`placetune/backends/base.py`), sets `name` and declares what it can do in",
       "`capabilities = placetune.Capabilities(...)`: simulated or real figures, the modes it measures, the",
       "objectives its measurements carry (energy needs power sampling; the Evaluator refuses an objective",
       "its backend does not declare), whether `probe()` reports the",
       "device's TensorRT, whether it keeps a build counter (`advance_builds`), and which options it takes",
       "(`device_profile`, `calibration_cache`). It writes `fingerprint` and `measure` (failures returned,",
       "never raised). Callers read only the declared capabilities, never probe attributes, and compare no",
       "backend names: the name is the registry's alone (`placetune/backends/registry.py`).",
       "It is made known in one of two ways: `placetune.register_backend(\"name\", Class, aliases=(...))` from",
       "Python (the built-ins register as `\"module:Class\"` strings, imported on first use), or, for an",
       "installed package, an entry point in the group `placetune.backends`",
       "(`[project.entry-points.\"placetune.backends\"] toy = \"toy_backend:ToyBackend\"`), read on the first",
       "look-up of a name not registered. Then `placetune tune --backend name` and",
       "`Evaluator(model, platform, backend=\"name\")` use it. `examples/toy_backend.py` is such a backend",
       "in one file; `tests/test_backend_contract.py` tunes it both ways. The two backends that measure on",
       "the Jetson share their device fingerprint, ONNX preparation and realised-placement reading in",
       "`placetune/backends/jetson.py`.", "",
       "**A measurement's details** (`Measurement.extra`) have declared keys: the TypedDict",
       "`placetune.measurement.Extra` lists every key with its type. A new key is added there (a backend's",
       "own keys may instead start with `x_`); the tests refuse an unknown key when a measurement is made",
       "or stored (`PLACETUNE_STRICT_EXTRA`, on in tests/conftest.py), and tests/test_measurement_extra.py",
       "checks every key the code names. Stored rows keep their JSON form.", "",
       "**A new search agent** derives from `search.Agent` (a `search(evaluator, budget)` loop) or",
       "`search.StepAgent` (ask/tell steps), and is registered with `search.register_agent(\"name\", Class)`",
       "or a package's `placetune.agents` entry point; then `placetune tune --agent name` and a fleet use",
       "it. `examples/toy_agent.py` is one in a file (tests/test_asktell.py tunes it both ways);",
       "`examples/custom_agent.py` drives the Evaluator by hand (tests/test_examples.py runs it).", "",
       "**A new platform** (a Jetson module placetune does not ship) is a `placetune.Platform` registered",
       "with `placetune.register_platform(platform, aliases=(...))` (`placetune/hardware/platforms.py`;",
       "a malformed field or a taken name is refused, a built-in one cannot be replaced). Then",
       "`get_platform(name)`, `Evaluator(model, name)` and `placetune tune --platform name` use it; the",
       "simulated Jetson models it from its figures. `examples/toy_platform.py` is one in a file;",
       "tests/test_extension_points.py tunes it by name through the Evaluator and `placetune tune`. The",
       "shipped modules are in the `PLATFORMS` table of the same file.", "",
       "**A new objective** is registered with `placetune.register_objective(name, direction=..., unit=...,",
       "value=fn, measured_from=(\"latency\",))` (`placetune/tuning/objectives.py`): `value` reads a",
       "successful measurement, `measured_from` names the built-in objectives it is computed from (a",
       "backend must declare them in its capabilities). The Evaluator, the agents, `placetune tune` and",
       "`placetune export` then rank by it. `examples/toy_objective.py` (the 99th-percentile latency) is",
       "one in a file; tests/test_extension_points.py searches it through the Evaluator and `placetune tune`.",
       "",
       "## Imports", "",
       "Every module names its dependencies at its top. No two modules import each other, directly or",
       "through others, counting imports inside functions, type-only imports (`if TYPE_CHECKING:`) and",
       "`lazy_import` (tests/test_architecture.py). Where a lower module needs only the shape of a higher",
       "one's object it declares that shape as a Protocol (`placetune.placement.stages.StageSpace`,",
       "`placetune.plan.view.PlanView`, `placetune.tuning.evaluator_view.EvaluatorView`); shared types live",
       "below both users (`search/result.py`, `placetune.calibration.design.Observation`).",
       "`import placetune` and the command line's start stay light: a module that needs a heavy package",
       "(TensorRT, PyCUDA, matplotlib, Optuna, SQLAlchemy, ONNX, SciPy) or a heavy placetune module only",
       "in some functions names it at its top with `placetune._lazy.lazy_import(\"name\")` (paired with",
       "the real import under `if TYPE_CHECKING:` for type checkers); it is imported on first use.", ""]
for pkg in ("placetune", "search"):
    out.append(f"## `{pkg}/`")
    out.append("")
    out.append("| module | lines | what it is for |")
    out.append("|---|---:|---|")
    for path in sorted((root / pkg).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text()
        doc = ast.get_docstring(ast.parse(text)) or ""
        first = doc.strip().splitlines()[0] if doc.strip() else ""
        out.append(f"| `{rel}` | {len(text.splitlines())} | {first.replace('|', '/')} |")
    out.append("")
(root / "docs" / "architecture.md").write_text("\n".join(out))
print(f"wrote {root / 'docs' / 'architecture.md'}")
