"""Which Jetson module this is: the device tree's ``compatible`` and ``model`` strings -> a platform profile.

A Jetson names itself twice in its device tree:

* ``/proc/device-tree/compatible``: NUL-separated ``vendor,name`` strings with the carrier and
  module part numbers, e.g. ``nvidia,p3737-0000+p3701-0005``, ``nvidia,p3701-0005``,
  ``nvidia,tegra234``. The module number (``p3701-0005``: Jetson AGX Orin 64GB) tells the SKU,
  memory size included. It is the ABI the kernel binds drivers to, so it is read first (NVIDIA's
  own Jetson.GPIO detects boards this way: ``compats_*`` in
  ``NVIDIA/jetson-gpio:lib/python/Jetson/GPIO/gpio_pin_data.py``).
* ``/proc/device-tree/model``: free text that changed between L4T releases: ``Jetson-AGX``
  (AGX Xavier, L4T 32.2 on: adafruit/Adafruit_Python_PlatformDetect PR #37), ``Jetson AGX
  Orin`` (JetPack 5's device tree), ``NVIDIA Jetson AGX Orin Developer Kit`` (JetPack 6 and
  mainline Linux), ``NVIDIA Orin NX Developer Kit``, ``NVIDIA Orin Nano Developer Kit``...
  Used when ``compatible`` names no module this table knows.

An AGX Orin developer kit flashed to emulate another Orin module (NVIDIA's emulation flash
configurations: ``flash.sh jetson-agx-orin-devkit-as-nx-16gb``, ``-as-nx-8gb``, ``-as-nano8gb``,
``-as-nano4gb``, ``-as-jao-32gb``; Jetson Linux Developer Guide, "Emulation Flash Configurations")
names both modules in one compatible string, ``<host>-as-<emulated>`` (``p3701-0000-as-p3767-0000``):
NVIDIA's own L4T power-setup script (``nvpower.sh``, ``set_socfamily``; public code index file id
34109126968, repository unnamed) matches that string in ``/proc/device-tree/compatible`` and sets up
the *emulated* module's nvpmodel file (``nvpmodel_p3767_0000.conf``). Such a board runs with the emulated
module's CPU, GPU and power modes, so it is identified as the emulated module
(:attr:`ModuleMatch.emulated_on` names the developer kit's module), never as the AGX Orin whose part
number also appears in the string.

:data:`MODULES` is the one table: module part number -> title, placetune platform profile, DLA
cores and where that comes from. :func:`identify_module` maps the two strings to a
:class:`ModuleMatch`; a module it does not know is said so (``known`` False), never guessed.

Example:
    >>> m = identify_module("Jetson AGX Orin", "nvidia,p3737-0000+p3701-0004\\x00nvidia,p3701-0004\\x00nvidia,tegra234")
    >>> m.module.title, m.platform, m.by
    ('Jetson AGX Orin 32GB', 'orin-agx', 'compatible')
    >>> identify_module("NVIDIA Orin Nano Developer Kit", None).platform
    'orin-nano'
    >>> identify_module("Raspberry Pi 4 Model B", None).known
    False
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["JetsonModule", "ModuleMatch", "MODULES", "identify_module", "read_device_tree"]

# sources (cited per row below)
_GPIO = "NVIDIA/jetson-gpio lib/python/Jetson/GPIO/gpio_pin_data.py (compats_*)"
_JTOP = "rbonghi/jetson_stats jtop/core/jetson_variables.py MODULE_NAME_TABLE"
_LINUX = "torvalds/linux arch/arm64/boot/dts/nvidia/"
_NO_DLA = "TensorRT 11.4.1 release notes: \"Jetson Thor has no DLA\" (shared/reference/tensorrt-dla.md §0.3)"
_DLA_FAQ = "NVIDIA DLA-SW FAQ: every AGX Orin / Orin NX / AGX Xavier / Xavier NX has DLA cores (reference §3.4)"


@dataclass(frozen=True)
class JetsonModule:
    """One Jetson module SKU.

    Attributes:
        part: the module's part number, e.g. ``"p3701-0005"`` (``-super``: Orin Nano/NX in
            JetPack 6.2's Super mode).
        title: e.g. ``"Jetson AGX Orin 64GB"``.
        platform: the placetune profile (:func:`placetune.hardware.platforms.get_platform`),
            None when placetune has none (Jetson Thor).
        dla_cores: DLA cores of the module.
        exact: the profile describes this very SKU (False: the nearest profile, e.g. the 64GB
            AGX Orin profile for the 32GB module, whose GPU has fewer SMs).
        source: where the part number, title and DLA count come from.
    """

    part: str
    title: str
    platform: str | None
    dla_cores: int
    exact: bool
    source: str


def _m(part: str, title: str, platform: str | None, dla: int, exact: bool, source: str) -> JetsonModule:
    return JetsonModule(part, title, platform, dla, exact, source)


#: module part number -> module. Compatible strings from NVIDIA's Jetson.GPIO and mainline
#: device trees; titles from jetson-stats' table; DLA cores from the DLA-SW FAQ / TensorRT docs.
MODULES: dict[str, JetsonModule] = {m.part: m for m in (
    # Jetson AGX Orin (t234, carrier p3737): 2 DLA v2
    _m("p3701-0000", "Jetson AGX Orin (developer kit module)", "orin-agx", 2, False,
       f"{_GPIO} compats_jetson_orins; {_LINUX}tegra234-p3737-0000+p3701-0000.dts; {_DLA_FAQ}"),
    _m("p3701-0001", "Jetson AGX Orin (p3701-0001)", "orin-agx", 2, False, f"{_GPIO} compats_jetson_orins; {_DLA_FAQ}"),
    _m("p3701-0004", "Jetson AGX Orin 32GB", "orin-agx", 2, False,
       f"{_GPIO} compats_jetson_orins; {_JTOP}; {_DLA_FAQ}"),
    _m("p3701-0005", "Jetson AGX Orin 64GB", "orin-agx", 2, True, f"{_GPIO} compats_jetson_orins; {_JTOP}; {_DLA_FAQ}"),
    _m("p3701-0008", "Jetson AGX Orin Industrial", "orin-agx", 2, False,
       f"{_GPIO} compats_jetson_orins; {_LINUX}tegra234-p3737-0000+p3701-0008.dts; {_DLA_FAQ}"),
    # Jetson Orin NX / Orin Nano (t234, module p3767, carriers p3768 / p3509)
    _m("p3767-0000", "Jetson Orin NX 16GB", "orin-nx-16gb", 2, True,
       f"{_GPIO} compats_jetson_orins_nx; {_LINUX}tegra234-p3768-0000+p3767-0000.dts; {_JTOP}; {_DLA_FAQ}"),
    _m("p3767-0001", "Jetson Orin NX 8GB", "orin-nx-8gb", 1, True,
       f"{_GPIO} compats_jetson_orins_nx; {_JTOP}; 1 DLA core: placetune's orin-nx-8gb profile (UNVERIFIED, "
       "reference §3.4)"),
    _m("p3767-0003", "Jetson Orin Nano 8GB", "orin-nano", 0, True,
       f"{_GPIO} compats_jetson_orins_nano; {_JTOP}; no DLA (reference §3.4)"),
    _m("p3767-0004", "Jetson Orin Nano 4GB", "orin-nano", 0, False,
       f"{_GPIO} compats_jetson_orins_nano; {_JTOP}; no DLA (reference §3.4)"),
    _m("p3767-0005", "Jetson Orin Nano 8GB (developer kit module)", "orin-nano", 0, True,
       f"{_GPIO} compats_jetson_orins_nano; {_LINUX}tegra234-p3768-0000+p3767-0005.dts; {_JTOP}"),
    _m("p3767-0000-super", "Jetson Orin NX 16GB (Super mode)", "orin-nx-16gb", 2, False,
       f"{_GPIO} compats_jetson_orins_nx (p3768-0000+p3767-0000-super); {_DLA_FAQ}"),
    _m("p3767-0001-super", "Jetson Orin NX 8GB (Super mode)", "orin-nx-8gb", 1, False,
       f"{_GPIO} compats_jetson_orins_nx (p3768-0000+p3767-0001-super)"),
    _m("p3767-0003-super", "Jetson Orin Nano 8GB Super", "orin-nano", 0, False,
       f"{_GPIO} compats_jetson_orins_nano (-super); the profile's clocks are the non-Super ones"),
    _m("p3767-0004-super", "Jetson Orin Nano 4GB Super", "orin-nano", 0, False,
       f"{_GPIO} compats_jetson_orins_nano (-super)"),
    _m("p3767-0005-super", "Jetson Orin Nano Super Developer Kit", "orin-nano", 0, False,
       f"{_GPIO} compats_jetson_orins_nano (p3768-0000+p3767-0005-super)"),
    # Jetson AGX Xavier (t194, module p2888, developer kit p2972): 2 DLA v1
    _m("p2888-0001", "Jetson AGX Xavier 16GB", "xavier-agx", 2, False, f"{_JTOP}; {_DLA_FAQ}"),
    _m("p2888-0003", "Jetson AGX Xavier 32GB", "xavier-agx", 2, True, f"{_JTOP}; {_DLA_FAQ}"),
    _m("p2888-0004", "Jetson AGX Xavier 32GB", "xavier-agx", 2, True, f"{_JTOP}; {_DLA_FAQ}"),
    _m("p2888-0005", "Jetson AGX Xavier 64GB", "xavier-agx", 2, False, f"{_JTOP}; {_DLA_FAQ}"),
    _m("p2888-0006", "Jetson AGX Xavier 8GB", "xavier-agx", 2, False, f"{_JTOP}; {_DLA_FAQ}"),
    _m("p2888-0008", "Jetson AGX Xavier Industrial", "xavier-agx", 2, False, f"{_JTOP}; {_DLA_FAQ}"),
    _m("p2972-0000", "Jetson AGX Xavier Developer Kit", "xavier-agx", 2, True,
       f"{_GPIO} compats_xavier; {_LINUX}tegra194-p2972-0000.dts; {_DLA_FAQ}"),
    # Jetson Xavier NX (t194, module p3668, carriers p3509 / p3449): 2 DLA v1
    _m("p3668-0000", "Jetson Xavier NX (developer kit, SD card)", "xavier-nx", 2, True,
       f"{_GPIO} compats_nx; {_LINUX}tegra194-p3509-0000+p3668-0000.dts; {_DLA_FAQ}"),
    _m("p3668-0001", "Jetson Xavier NX", "xavier-nx", 2, True, f"{_GPIO} compats_nx; {_JTOP}; {_DLA_FAQ}"),
    _m("p3668-0003", "Jetson Xavier NX 16GB", "xavier-nx", 2, False, f"{_GPIO} compats_nx; {_JTOP}; {_DLA_FAQ}"),
    # Jetson Thor (t264, module p3834): no DLA, no placetune profile
    _m("p3834-0008", "Jetson AGX Thor (T5000)", None, 0, False,
       f"{_GPIO} compats_jetson_thor_reference; {_LINUX}tegra264-p4071-0000+p3834-0008.dts; {_JTOP}; {_NO_DLA}"),
    _m("p3834-0005", "Jetson Thor (p3834-0005)", None, 0, False,
       f"{_GPIO} compats_jetson_thor_reference (p3971-0050+p3834-0005); {_NO_DLA}"),
)}

#: compatible names without a module number that still name one (AGX Xavier device trees).
_COMPAT_ALIASES = {"jetson-xavier": "p2972-0000", "jetson-xavier-industrial": "p2888-0008",
                   "galen-industrial": "p2888-0008", "p2972-0006": "p2972-0000"}

#: model string patterns (lower case, first match wins) -> candidate modules. The model string
#: cannot tell memory sizes apart, so a family lists every SKU; TensorRT's DLA core count
#: (:meth:`ModuleMatch.resolve`) picks between SKUs that differ in it (Orin NX 8GB / 16GB).
_MODEL_PATTERNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (r"\bthor\b", ("p3834-0008",)),
    (r"\bagx[- ]orin\b|\borin agx\b", ("p3701-0005", "p3701-0004")),
    (r"\borin nx\b", ("p3767-0000", "p3767-0001")),
    (r"\borin nano\b", ("p3767-0005", "p3767-0003", "p3767-0004")),
    (r"\bxavier nx\b", ("p3668-0001", "p3668-0000", "p3668-0003")),
    (r"\bagx xavier\b|\bjetson-agx\b|\bjetson[- ]xavier\b", ("p2888-0004",)),
)
_PART = re.compile(r"p(\d{4})-(\d{4})(-super)?")
#: an emulation flash configuration's compatible: ``p3701-0000-as-p3767-0000`` (module -as- emulated module)
_EMULATED = re.compile(r"p(\d{4}-\d{4})-as-p(\d{4}-\d{4})")


@dataclass(frozen=True)
class ModuleMatch:
    """What the device tree says this board is.

    Attributes:
        model: the ``model`` string read (None off a Jetson).
        compatible: the ``compatible`` strings read.
        candidates: the modules it may be (one when ``compatible`` names the module).
        by: ``"compatible"``, ``"model"`` or ``"none"`` (nothing known matched).
        emulated_on: an AGX Orin developer kit flashed to emulate :attr:`module`: the kit's module
            part number (``"p3701-0000"``, from ``p3701-0000-as-p3767-0000``); None otherwise.
    """

    model: str | None
    compatible: tuple[str, ...] = ()
    candidates: tuple[JetsonModule, ...] = field(default_factory=tuple)
    by: str = "none"
    emulated_on: str | None = None

    @property
    def known(self) -> bool:
        """Whether the strings name a module of :data:`MODULES`."""
        return bool(self.candidates)

    @property
    def module(self) -> JetsonModule | None:
        """The module (the first candidate), None when unknown."""
        return self.candidates[0] if self.candidates else None

    @property
    def platform(self) -> str | None:
        """The placetune profile of :attr:`module` (None: unknown module, or one without a profile)."""
        return self.module.platform if self.module else None

    @property
    def profiles(self) -> tuple[str, ...]:
        """The placetune profiles a run on this board may name: each candidate's, and for an Orin Nano
        ``orin-nano-super`` too (the same module under JetPack 6.2's Super power modes; its rows here
        name ``orin-nano``, whose clocks are the non-Super ones). Empty for a module without a profile."""
        names = [c.platform for c in self.candidates if c.platform]
        if "orin-nano" in names:
            names.append("orin-nano-super")
        return tuple(dict.fromkeys(names))

    def resolve(self, dla_cores: int | None) -> "ModuleMatch":
        """The match narrowed to the candidates with ``dla_cores`` DLA cores (as TensorRT reports
        them); unchanged when none or all of them have that many."""
        if dla_cores is None or len(self.candidates) < 2:
            return self
        fits = tuple(m for m in self.candidates if m.dla_cores == int(dla_cores))
        if not fits or len(fits) == len(self.candidates):
            return self
        return ModuleMatch(self.model, self.compatible, fits, self.by, self.emulated_on)

    def describe(self) -> str:
        """One line: the module and its profile, or why none is known."""
        said = repr(self.model) if self.model else "no device-tree model string"
        if not self.known:
            comp = f", compatible {', '.join(self.compatible)}" if self.compatible else ""
            return f"unknown module ({said}{comp}): placetune has no table entry for it"
        m = self.candidates[0]
        which = " or ".join(dict.fromkeys(c.title for c in self.candidates))
        how = f"compatible {m.part}" if self.by == "compatible" else f"model string {said}"
        if self.emulated_on:
            which += f" emulated on a Jetson AGX Orin developer kit ({self.emulated_on})"
            how = f"compatible {self.emulated_on}-as-{m.part}"
        prof = (f"profile {m.platform}" + ("" if m.exact else " (the nearest profile)")) if m.platform \
            else "no placetune profile"
        return f"{which} (from the {how}): {m.dla_cores} DLA core(s), {prof}"


def _compat_list(compatible: str | Sequence[str] | None) -> tuple[str, ...]:
    if compatible is None:
        return ()
    if isinstance(compatible, str):
        return tuple(s.strip() for s in compatible.split("\x00") if s.strip())
    return tuple(str(s).strip() for s in compatible if str(s).strip())


def identify_module(model: str | None, compatible: str | Sequence[str] | None = None) -> ModuleMatch:
    """The Jetson module named by device-tree strings.

    Args:
        model: ``/proc/device-tree/model`` (trailing NULs allowed), None when absent.
        compatible: ``/proc/device-tree/compatible``: the raw NUL-separated text or its strings.

    Returns:
        A :class:`ModuleMatch`; ``known`` is False when neither string names a module of
        :data:`MODULES` (the caller says so and goes on without a module).
    """
    text = (model or "").replace("\x00", "").strip() or None
    comps = _compat_list(compatible)
    # an emulation flash configuration names the developer kit's module and the emulated one: the
    # board runs as the emulated module (its nvpmodel file, CPU and GPU), so that one is the board's
    for name in comps:
        for host, emulated in _EMULATED.findall(name):
            if f"p{emulated}" in MODULES:
                return ModuleMatch(text, comps, (MODULES[f"p{emulated}"],), "compatible", f"p{host}")
    # compatible: module numbers (text pasted without its NULs still splits by part number)
    for name in comps:
        for num, sku, super_ in _PART.findall(name):
            part = f"p{num}-{sku}{super_}"
            if part in MODULES and num != "2972":  # p2972 is a carrier: a module number wins over it
                return ModuleMatch(text, comps, (MODULES[part],), "compatible")
    for name in comps:
        tail = name.split(",", 1)[-1]
        for key, part in _COMPAT_ALIASES.items():
            if tail == key or tail.startswith(key + "nvidia"):
                return ModuleMatch(text, comps, (MODULES[part],), "compatible")
        if "p2972-0000" in tail:
            return ModuleMatch(text, comps, (MODULES["p2972-0000"],), "compatible")
    if text:
        low = text.lower()
        for pattern, parts in _MODEL_PATTERNS:
            if re.search(pattern, low):
                return ModuleMatch(text, comps, tuple(MODULES[p] for p in parts), "model")
    return ModuleMatch(text, comps, (), "none")


def read_device_tree(root: str | Path = "/proc/device-tree") -> tuple[str | None, tuple[str, ...]]:
    """``(model, compatible strings)`` of this machine's device tree; ``(None, ())`` off a Jetson
    (or wherever the files cannot be read)."""
    base = Path(root)

    def read(name: str) -> str | None:
        try:
            return (base / name).read_bytes().decode("utf-8", errors="replace")
        except OSError:
            return None

    model = read("model")
    model = model.replace("\x00", "").strip() or None if model is not None else None
    return model, _compat_list(read("compatible"))
