"""Jetson platform profiles: devices, peak rates, memory bandwidth and a simple power model.

Every figure names its source in a comment. "ref §N" means
``placetune/data/jetson-measurements.md`` section N (a copy of the project's reference
sheet of published numbers). Figures marked ESTIMATE are placetune's own derivations or
guesses; they only set the *simulated* backend and must be replaced by measurements
when a real device is used.

Conventions: peak rates are *dense* (no 2:4 structured sparsity): NVIDIA quotes sparse
INT8 TOPS for Orin, so dense = sparse / 2 (ref §1). DLA rates are per core. Power in
watts; bandwidth in GB/s.

Example:
    >>> from placetune.platforms import get_platform
    >>> p = get_platform("agx-orin")
    >>> p.name, p.devices
    ('orin-agx', ('GPU', 'DLA0', 'DLA1'))
    >>> get_platform("orin-nano").devices
    ('GPU',)
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from placetune.errors import ConfigError, UnknownNameError
from placetune.hardware.power_modes import modes_of, super_names

__all__ = ["Platform", "get_platform", "platform_names", "register_platform", "unregister_platform", "PLATFORMS",
           "ALIASES"]

_SRC_REF = "placetune/data/jetson-measurements.md §1 (DLA-SW README/FAQ, NVIDIA Jetson module tables)"


@dataclass(frozen=True)
class Platform:
    """One Jetson module as seen by placetune.

    Attributes:
        name: canonical profile name, e.g. ``"orin-agx"``.
        title: human name, e.g. ``"Jetson AGX Orin 64GB"``.
        dla_count: number of DLA cores (0 on Orin Nano).
        dla_version: 1 (Xavier, DLA v1), 2 (Orin, DLA v2) or None (no DLA).
        gpu_fp16_tflops: dense FP16 tensor-core peak of the GPU.
        gpu_int8_tops: dense INT8 tensor-core peak of the GPU.
        dla_fp16_tflops: dense FP16 peak of *one* DLA core (0 without DLA).
        dla_int8_tops: dense INT8 peak of *one* DLA core (0 without DLA).
        dram_gbps: DRAM bandwidth shared by GPU and DLAs, GB/s.
        gpu_sm_count: streaming multiprocessors of the GPU.
        dla_sram_mib: on-chip SRAM a DLA core can use, MiB (Orin: 1 MiB dedicated per
            core; Xavier: 4 MiB shared by both DLAs and both PVAs).
        power_modes: nvpmodel mode names, fastest first.
        gpu_active_w: typical extra module power while the GPU runs a CNN (ESTIMATE).
        dla_active_w: typical extra module power per busy DLA core (ESTIMATE).
        idle_w: module power with nothing running (ESTIMATE).
        jetpack_trt: TensorRT versions (major.minor) shipped by JetPacks for this module
            that placetune targets.
        source: where the figures come from.
    """

    name: str
    title: str
    dla_count: int
    dla_version: int | None
    gpu_fp16_tflops: float
    gpu_int8_tops: float
    dla_fp16_tflops: float
    dla_int8_tops: float
    dram_gbps: float
    gpu_sm_count: int
    dla_sram_mib: float
    power_modes: tuple[str, ...]
    gpu_active_w: float
    dla_active_w: float
    idle_w: float
    jetpack_trt: tuple[str, ...]
    source: str

    @property
    def devices(self) -> tuple[str, ...]:
        """Device names, GPU first: ``("GPU", "DLA0", "DLA1")`` on a 2-DLA module."""
        return ("GPU",) + tuple(f"DLA{i}" for i in range(self.dla_count))

    @property
    def has_dla(self) -> bool:
        """True when the module has at least one DLA core."""
        return self.dla_count > 0

    def has_power_mode(self, mode: str) -> bool:
        """Whether ``mode`` names one of the module's power modes (any case; nvpmodel's own name such
        as ``MODE_30W`` too); ``MAXN``, Settings' default, means the fastest mode of every module."""
        table = modes_of(self.name, mode)  # the profile's own nvpmodel file, then its JetPack 6.2 Super one
        if table is not None:
            return table.mode(mode) is not None
        key = str(mode).strip().upper()
        return key in {m.upper() for m in self.power_modes} or (key == "MAXN" and bool(self.power_modes))

    def mode_list(self) -> str:
        """The modes as a message names them: :attr:`power_modes`, then the module's JetPack 6.2
        Super modes where its profile follows the older nvpmodel file (Orin NX, Orin Nano)."""
        return ", ".join(self.power_modes) + super_names(self.name)

    def check_power_mode(self, mode: str) -> str:
        """The power mode as placetune names it (``30w`` and nvpmodel's ``MODE_30W`` -> ``30W``;
        ``MAXN`` stays ``MAXN``, Settings' default, on every module).

        Raises:
            ConfigError: a mode this module does not have, naming the field and the module's modes.
        """
        if not self.has_power_mode(mode):
            raise ConfigError(f"power_mode {str(mode)[:40]!r}: {self.name} has the power modes "
                              f"{self.mode_list()} (MAXN: the fastest)")
        key = str(mode).strip().upper()
        table = modes_of(self.name, key)
        if key == "MAXN":
            return "MAXN"
        if table is not None:
            found = table.mode(key)
            assert found is not None
            return found.label
        return next(m for m in self.power_modes if m.upper() == key)

    def has_device(self, device: str) -> bool:
        """Whether ``device`` (``"GPU"``, ``"DLA0"``, ...; case-insensitive) exists here."""
        return str(device).strip().upper() in self.devices

    def peak_tops(self, device: str, precision: str) -> float:
        """Dense peak of one device in TOPS (TFLOPS for fp16).

        Args:
            device: ``"GPU"`` or ``"DLA<k>"``.
            precision: ``"fp16"`` or ``"int8"``.

        Raises:
            UnknownNameError: the device does not exist on this platform or the
                precision is not fp16/int8.
        """
        dev = str(device).strip().upper()
        if not self.has_device(dev):
            raise UnknownNameError(
                f"device {device!r} does not exist on {self.name}; valid: {', '.join(self.devices)}"
            )
        prec = str(precision).strip().lower()
        table = {
            ("GPU", "fp16"): self.gpu_fp16_tflops,
            ("GPU", "int8"): self.gpu_int8_tops,
            ("DLA", "fp16"): self.dla_fp16_tflops,
            ("DLA", "int8"): self.dla_int8_tops,
        }
        key = ("GPU" if dev == "GPU" else "DLA", prec)
        if key not in table:
            raise UnknownNameError(f"precision {precision!r} has no peak figure; use 'fp16' or 'int8'")
        return table[key]

    @property
    def default_trt_version(self) -> str:
        """The TensorRT version whose DLA rules apply when none is given: 8.6 (JetPack 6.0)
        where a JetPack ships it (Orin), else the newest this module gets (Xavier: 8.5,
        JetPack 5.1 being Xavier's last)."""
        return "8.6" if "8.6" in self.jetpack_trt else self.jetpack_trt[-1]

    def trt_version_for(self, power_mode: str | None = None) -> str:
        """The TensorRT version whose DLA rules apply when none is given, for a study in ``power_mode``:
        10.3 for a mode only the module's JetPack 6.2 ``_super`` nvpmodel file has (``MAXN_SUPER`` and
        ``40W`` on Orin NX, ``25W`` and ``MAXN_SUPER`` on Orin Nano: a board runs them only when flashed
        with JetPack 6.2, whose TensorRT is 10.3), else :attr:`default_trt_version` (8.6 on the other
        Orin modes: JetPack 6.0 has no Super modes)."""
        if power_mode is not None:
            table, own = modes_of(self.name, power_mode), modes_of(self.name)
            if table is not None and table is not own and "10.3" in self.jetpack_trt:
                return "10.3"
        return self.default_trt_version

    def ships_trt(self, version: str) -> bool:
        """Whether a JetPack for this module ships TensorRT ``version`` (major.minor compare)."""
        parts = str(version).strip().split(".")
        return ".".join(parts[:2]) in self.jetpack_trt

    def ships_trt_major(self, version: str) -> bool:
        """Whether a JetPack for this module ships a TensorRT of ``version``'s major release (10.7 on
        Orin: yes, JetPack 6 has 10.3; 10.3 on Xavier: no, Xavier's last JetPack is 5)."""
        major = str(version).strip().split(".")[0]
        return any(v.split(".")[0] == major for v in self.jetpack_trt)


# Orin DLA FP16: the DLA-SW FAQ says Orin's DLA trades "lower FP16 convolution compute" for ~9x
# INT8 over Xavier. NVIDIA's quantitative statement, "FP16 convolutions [on the Orin DLA] can be up
# to 2x slower than Xavier's", is known here from two independent third-party copies (a Chinese
# translation of NVIDIA's DLA guide, seed 002 section 3.3, and an English note citing the TensorRT
# 10.x "Working with DLA" page); NVIDIA's page itself is not in the stored material
# (placetune/data/published.md, history steps 12 and 20). Read at each module's top DLA clock:
# AGX Orin's per-core FP16 peak = AGX Xavier's 2.5 TFLOPS / 2 = 1.25 TFLOPS, 1/21 of its dense
# INT8 26.25 TOPS; the other Orin DLAs (the same core at a lower clock) keep that ratio. "Up to"
# makes it a bound: the published ResNet-50 DLA FP16 row (17.7 ms, a validation row that measures
# this figure and does not set it) is still slower than the simulator with it.
_XAVIER_DLA_FP16 = 2.5  # ref §1: 2.5 FP16 TFLOPS per Xavier DLA
_AGX_ORIN_DLA_INT8 = 105.0 / 2 / 2  # ref §1: 105 sparse TOPS for both DLAs -> /2 dense, /2 per core = 26.25
_ORIN_DLA_FP16_PER_INT8 = _XAVIER_DLA_FP16 / 2 / _AGX_ORIN_DLA_INT8

# Orin GPU FP16: Ampere tensor cores run dense FP16 at half their dense INT8 rate.
# ESTIMATE derived from the INT8 figure (the reference lists only INT8 TOPS for Orin).
_AMPERE_FP16_PER_INT8 = 0.5

# Orin JetPacks: 5.1.x -> TRT 8.5.2, 6.0 -> 8.6.2, 6.1/6.2 -> 10.3 (reference tensorrt-dla.md
# §3.4). TRT 11.4.1 (JetPack 7.2.2+, strongly typed only) restores DLA on AGX Orin (the 11.4.1
# DLA page names "Jetson AGX Orin"): listed for AGX Orin only; whether the Orin NX and Nano get
# a JetPack 7 with TensorRT 11 is not in the reference.
_ORIN_TRT = ("8.5", "8.6", "10.3")
_AGX_ORIN_TRT = _ORIN_TRT + ("11.4",)
# Xavier: JetPack 5.x is the last (TRT 8.5.2); UNVERIFIED in the reference (§3.4).
_XAVIER_TRT = ("8.5",)

_NX16_DLA_INT8 = 20.0 / 2  # ref §1: "20 + 20 sparse TOPS" -> 10 dense per core

PLATFORMS: dict[str, Platform] = {
    p.name: p
    for p in (
        Platform(
            name="orin-agx",
            title="Jetson AGX Orin 64GB",
            dla_count=2,  # ref §1: 2x DLA v2
            dla_version=2,  # ref §1
            gpu_int8_tops=171.0 / 2,  # ref §1: 171 sparse INT8 TOPS -> 85.5 dense
            gpu_fp16_tflops=171.0 / 2 * _AMPERE_FP16_PER_INT8,  # ESTIMATE: 42.75 (see above)
            dla_int8_tops=_AGX_ORIN_DLA_INT8,  # ref §1: 26.25 dense per core
            dla_fp16_tflops=_AGX_ORIN_DLA_INT8 * _ORIN_DLA_FP16_PER_INT8,  # 1.25: half of Xavier's (see above)
            dram_gbps=204.8,  # ref §1
            gpu_sm_count=16,  # derived: ref §1 2048 CUDA cores / 128 per Ampere SM (64 TC / 4 per SM)
            dla_sram_mib=1.0,  # ref §1: 1 MiB SRAM per Orin DLA core
            power_modes=("MAXN", "50W", "30W", "15W"),  # nvpmodel_p3701_0000.conf (placetune/hardware/power_modes.py)
            gpu_active_w=30.0,  # ESTIMATE: MAXN CNN load, module budget 60 W
            # ESTIMATE: GPU 85.5 TOPS / 30 W = 2.9 TOPS/W; ref §1 "DLA is 3x-5x more power
            # efficient than the GPU" -> 26.25 TOPS at 9-14 TOPS/W = 1.9-2.9 W per core on peak
            # figures. On simulated ResNet-50 INT8 bs 8 (each accelerator alone, its own energy)
            # 2.0 W gives 4.0x images/J, the middle of 3-5x (3.5 W gave 2.4x once the Orin GPU was
            # fitted on MLPerf rows); tests/test_simulate.py checks the ratio stays within 3-5x.
            dla_active_w=2.0,
            idle_w=7.0,  # ESTIMATE
            jetpack_trt=_AGX_ORIN_TRT,
            source=_SRC_REF,
        ),
        Platform(
            name="orin-nx-16gb",
            title="Jetson Orin NX 16GB",
            dla_count=2,  # ref §1: 2x DLA v2, 614 MHz
            dla_version=2,
            gpu_int8_tops=60.0 / 2,  # ref §1: 60 sparse INT8 TOPS -> 30 dense
            gpu_fp16_tflops=60.0 / 2 * _AMPERE_FP16_PER_INT8,  # ESTIMATE: 15
            dla_int8_tops=_NX16_DLA_INT8,  # ref §1: 10 dense per core
            dla_fp16_tflops=_NX16_DLA_INT8 * _ORIN_DLA_FP16_PER_INT8,  # 0.476: AGX Orin's ratio (see above)
            dram_gbps=102.4,  # ref §1
            gpu_sm_count=8,  # derived: ref §1 1024 cores, 32 TC -> 8 Ampere SMs
            dla_sram_mib=1.0,  # ref §1 (Orin DLA, per core)
            power_modes=("MAXN", "25W", "15W", "10W"),  # nvpmodel_p3767_0000.conf; _super.conf's too (power_modes.py)
            gpu_active_w=14.0,  # ESTIMATE
            dla_active_w=0.8,  # ESTIMATE (orin-agx's 2.0 W scaled by DLA clock 614 MHz vs 1.6 GHz)
            idle_w=4.0,  # ESTIMATE
            jetpack_trt=_ORIN_TRT,
            source=_SRC_REF,
        ),
        Platform(
            name="orin-nx-8gb",
            title="Jetson Orin NX 8GB",
            dla_count=1,  # ref §1: 1x DLA v2 (reference tensorrt-dla.md §3.4: UNVERIFIED, query builder.num_DLA_cores)
            dla_version=2,
            # ESTIMATE: ref §1 gives only "70 TOPS module total" (sparse); minus one DLA of the
            # NX 16GB kind (20 sparse) leaves 50 sparse -> 25 dense for the GPU.
            gpu_int8_tops=(70.0 - 20.0) / 2,
            gpu_fp16_tflops=(70.0 - 20.0) / 2 * _AMPERE_FP16_PER_INT8,  # ESTIMATE: 12.5
            dla_int8_tops=_NX16_DLA_INT8,  # ESTIMATE: same DLA as Orin NX 16GB (10 dense)
            dla_fp16_tflops=_NX16_DLA_INT8 * _ORIN_DLA_FP16_PER_INT8,  # 0.476: AGX Orin's ratio (see above)
            dram_gbps=102.4,  # ref §1
            gpu_sm_count=8,  # derived: ref §1 1024-core Ampere -> 8 SMs
            dla_sram_mib=1.0,  # ref §1 (Orin DLA, per core)
            power_modes=("MAXN", "20W", "15W", "10W"),  # nvpmodel_p3767_0001.conf; _super.conf's too (power_modes.py)
            gpu_active_w=12.0,  # ESTIMATE
            dla_active_w=1.0,  # ESTIMATE (as orin-nx-16gb)
            idle_w=4.0,  # ESTIMATE
            jetpack_trt=_ORIN_TRT,
            source=_SRC_REF,
        ),
        Platform(
            name="orin-nano",
            title="Jetson Orin Nano 8GB",
            dla_count=0,  # ref §1: none (reference tensorrt-dla.md §3.4: not in the DLA-SW FAQ list)
            dla_version=None,
            gpu_int8_tops=40.0 / 2,  # ref §1: 40 sparse TOPS -> 20 dense (67 sparse "Super" not modelled)
            gpu_fp16_tflops=40.0 / 2 * _AMPERE_FP16_PER_INT8,  # ESTIMATE: 10
            dla_int8_tops=0.0,
            dla_fp16_tflops=0.0,
            dram_gbps=68.0,  # ref §1 (102 GB/s for the "Super" mode)
            gpu_sm_count=8,  # derived: ref §1 1024-core Ampere -> 8 SMs
            dla_sram_mib=0.0,
            power_modes=("15W", "7W"),  # nvpmodel_p3767_0003.conf (hardware/power_modes.py); 15W has no cap
            gpu_active_w=8.0,  # ESTIMATE
            dla_active_w=0.0,
            idle_w=3.0,  # ESTIMATE
            jetpack_trt=_ORIN_TRT,
            source=_SRC_REF,
        ),
        Platform(
            name="orin-nano-super",
            title="Jetson Orin Nano 8GB Super",
            dla_count=0,  # ref §1: the Orin Nano has no DLA ("Super" raises clocks only)
            dla_version=None,
            gpu_int8_tops=67.0 / 2,  # ref §1: 67 sparse TOPS "Super" -> 33.5 dense (MAXN_SUPER)
            gpu_fp16_tflops=67.0 / 2 * _AMPERE_FP16_PER_INT8,  # ESTIMATE: 16.75
            dla_int8_tops=0.0,
            dla_fp16_tflops=0.0,
            dram_gbps=102.4,  # ref §1: "102 Super" GB/s (128-bit LPDDR5 at EMC 3199 MHz)
            gpu_sm_count=8,  # derived: ref §1 1024-core Ampere -> 8 SMs
            dla_sram_mib=0.0,
            power_modes=("MAXN_SUPER", "25W", "15W"),  # nvpmodel_p3767_0003_super.conf (hardware/power_modes.py)
            gpu_active_w=12.0,  # ESTIMATE (orin-nano's 8 W at 625 MHz, more at 1020 MHz; module budget 25 W)
            dla_active_w=0.0,
            idle_w=3.0,  # ESTIMATE (as orin-nano)
            jetpack_trt=("10.3",),  # the Super modes need JetPack 6.2 (TensorRT 10.3)
            source=_SRC_REF,
        ),
        Platform(
            name="xavier-agx",
            title="Jetson AGX Xavier 32GB",
            dla_count=2,  # ref §1: 2x DLA v1, 1.4 GHz
            dla_version=1,
            gpu_int8_tops=22.0,  # ref §1: ~22 INT8 TOPS (low confidence; Volta has no sparsity, so dense)
            gpu_fp16_tflops=11.0,  # ref §1: ~11 FP16 TFLOPS (low confidence)
            dla_int8_tops=5.0,  # ref §1: 5 INT8 TOPS per DLA
            dla_fp16_tflops=_XAVIER_DLA_FP16,  # ref §1: 2.5 FP16 TFLOPS per DLA
            dram_gbps=136.5,  # ref §1
            gpu_sm_count=8,  # derived: ref §1 512 CUDA cores / 64 per Volta SM (64 TC / 8 per SM)
            dla_sram_mib=4.0,  # ref §1: 4 MiB shared by 2 DLAs + 2 PVAs
            # nvpmodel_t194.conf (placetune/hardware/power_modes.py), fastest first
            power_modes=("MAXN", "30W_ALL", "30W_6CORE", "30W_4CORE", "30W_2CORE", "15W", "15W_DESKTOP", "10W"),
            gpu_active_w=20.0,  # ESTIMATE
            dla_active_w=1.5,  # ESTIMATE
            idle_w=6.0,  # ESTIMATE
            jetpack_trt=_XAVIER_TRT,
            source=_SRC_REF,
        ),
        Platform(
            name="xavier-nx",
            title="Jetson Xavier NX",
            dla_count=2,  # ref §1: 2x DLA v1, 1.1 GHz
            dla_version=1,
            # ESTIMATE: AGX Xavier GPU scaled by SMs (6/8) and clock (1100/1377 MHz): 13.2 INT8, 6.6 FP16.
            gpu_int8_tops=22.0 * 6 / 8 * 1100 / 1377,
            gpu_fp16_tflops=11.0 * 6 / 8 * 1100 / 1377,
            # ESTIMATE: AGX Xavier DLA scaled by clock (1.1 / 1.4 GHz): 3.9 INT8, 1.96 FP16 per core.
            # Cross-check: 13.2 + 2 x 3.9 = 21 TOPS = ref §1 "21 TOPS module total".
            dla_int8_tops=5.0 * 1.1 / 1.4,
            dla_fp16_tflops=2.5 * 1.1 / 1.4,
            dram_gbps=59.7,  # ref §1
            gpu_sm_count=6,  # derived: ref §1 384 cores / 64 per Volta SM (48 TC / 8 per SM)
            dla_sram_mib=4.0,  # ESTIMATE: assumed same 4 MiB shared SRAM as AGX Xavier (ref §1 gives AGX only)
            # nvpmodel_t194_p3668.conf (placetune/hardware/power_modes.py), fastest first; no MAXN in the file
            power_modes=("20W_6CORE", "20W_4CORE", "20W_2CORE", "15W_6CORE", "15W_4CORE", "15W_2CORE", "10W_4CORE",
                         "10W_2CORE", "10W_DESKTOP"),
            gpu_active_w=8.0,  # ESTIMATE
            dla_active_w=1.0,  # ESTIMATE
            idle_w=3.0,  # ESTIMATE
            jetpack_trt=_XAVIER_TRT,
            source=_SRC_REF,
        ),
    )
}

#: Alternative spellings accepted by :func:`get_platform` (after lower-casing, turning
#: ``_`` and spaces into ``-`` and dropping a leading ``jetson-``).
ALIASES: dict[str, str] = {
    "agx-orin": "orin-agx",
    "orin": "orin-agx",
    "orin-agx-64gb": "orin-agx",
    "agx-orin-64gb": "orin-agx",
    "orin-nx": "orin-nx-16gb",
    "orin-nx16": "orin-nx-16gb",
    "orin-nx-16": "orin-nx-16gb",
    "orin-nx8": "orin-nx-8gb",
    "orin-nx-8": "orin-nx-8gb",
    "orin-nano-8gb": "orin-nano",
    "orin-nano-8gb-super": "orin-nano-super",
    "nano-super": "orin-nano-super",
    "xavier": "xavier-agx",
    "agx-xavier": "xavier-agx",
    "xavier-agx-32gb": "xavier-agx",
    "nx-xavier": "xavier-nx",
    "xaviernx": "xavier-nx",
}


#: Jetsons placetune does not model, and why: the name of one is refused, never taken for another
#: (``jetson-nano`` is not the Orin Nano). JetPack 4.6 (TensorRT 8.2) is the last release for them.
UNSUPPORTED: dict[str, str] = {
    "nano": "the original Jetson Nano (Maxwell GPU, JetPack 4.6 with TensorRT 8.2 at most): it has no DLA and "
            "TensorRT 8.5+ does not run on it, so there is nothing to place; for the Jetson Orin Nano use orin-nano",
    "nano-2gb": "the Jetson Nano 2GB (Maxwell GPU, no DLA, TensorRT 8.2 at most); for the Orin Nano use orin-nano",
    "tx2": "the Jetson TX2 (Pascal GPU, no DLA, TensorRT 8.2 at most)",
    "tx2-nx": "the Jetson TX2 NX (Pascal GPU, no DLA, TensorRT 8.2 at most)",
    "tx1": "the Jetson TX1 (Maxwell GPU, no DLA, TensorRT 8.2 at most)",
}


def platform_names() -> list[str]:
    """Canonical profile names, in a stable order."""
    return list(PLATFORMS)


def _normalise(name: str) -> str:
    key = str(name).strip().lower().replace("_", "-").replace(" ", "-")
    if key.startswith("jetson-"):
        key = key[len("jetson-"):]
    return key


def get_platform(name: str | Platform) -> Platform:
    """The profile called ``name`` (canonical name or alias, case-insensitive).

    Args:
        name: e.g. ``"orin-agx"``, ``"AGX Orin"``, ``"jetson_xavier_nx"``; a
            :class:`Platform` is returned unchanged.

    Raises:
        UnknownNameError: no such profile; the message lists the valid names.

    Example:
        >>> get_platform("xavier").name
        'xavier-agx'
    """
    if isinstance(name, Platform):
        return name
    key = _normalise(name)
    key = ALIASES.get(key, key)
    if key in PLATFORMS:
        return PLATFORMS[key]
    if key in UNSUPPORTED:
        raise UnknownNameError(f"platform {name!r} is {UNSUPPORTED[key]}; placetune does not support it "
                               f"(valid platforms: {', '.join(PLATFORMS)})")
    close = difflib.get_close_matches(key, list(PLATFORMS) + list(ALIASES), n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise UnknownNameError(
        f"unknown platform {name!r}{hint}; valid platforms: {', '.join(PLATFORMS)}"
    )


#: The platforms placetune ships (:func:`unregister_platform` refuses them).
BUILTIN_PLATFORMS = frozenset(PLATFORMS)


def register_platform(platform: Platform, *, aliases: tuple[str, ...] | list[str] = (), replace: bool = False) -> None:
    """Make a platform known by name: ``get_platform(name)``, ``Evaluator(model, name)`` and
    ``placetune tune --platform name`` then use it (the extension point for a module placetune does
    not ship; ``examples/toy_platform.py`` is one in a file).

    The simulated Jetson models it from its figures (an Ampere GPU unless the name starts with
    ``xavier``; power modes other than the first scaled as for a module without a transcribed
    nvpmodel file). Its ``source`` should say where the figures come from.

    Args:
        platform: the :class:`Platform`; its ``name`` is lower case (letters, digits, dashes).
        aliases: other names for it (normalised like the name).
        replace: allow replacing a platform registered before (never a built-in one).

    Raises:
        ConfigError: not a Platform, a malformed name or field, or a name or alias already taken.
    """
    if not isinstance(platform, Platform):
        raise ConfigError(f"register_platform: expected a placetune Platform, not {type(platform).__name__}")
    name = platform.name
    if not isinstance(name, str) or not name or _normalise(name) != name or not all(
            c.isalnum() or c == "-" for c in name):
        raise ConfigError(f"platform name {str(name)[:40]!r}: lower-case letters, digits and dashes only")
    if isinstance(platform.dla_count, bool) or platform.dla_count not in (0, 1, 2):
        raise ConfigError(f"platform {name}: dla_count must be 0, 1 or 2, not {platform.dla_count!r}")
    if (platform.dla_version is None) != (platform.dla_count == 0) or platform.dla_version not in (None, 1, 2):
        raise ConfigError(f"platform {name}: dla_version must be 1 or 2 with DLA cores, None without, "
                          f"not {platform.dla_version!r}")
    if not platform.power_modes or not all(isinstance(m, str) and m for m in platform.power_modes):
        raise ConfigError(f"platform {name}: power_modes must name at least one mode, fastest first")
    keys = [_normalise(a) for a in aliases]
    for key in [name, *keys]:
        taken = key in PLATFORMS or key in ALIASES or key in UNSUPPORTED
        ours = key in PLATFORMS and key == name or ALIASES.get(key) == name
        if key in BUILTIN_PLATFORMS or key in UNSUPPORTED or (taken and not (replace and ours)):
            raise ConfigError(f"platform name {key!r} is taken; choose another name"
                              + ("" if key in BUILTIN_PLATFORMS or key in UNSUPPORTED else " or pass replace=True"))
    PLATFORMS[name] = platform
    for key in keys:
        if key != name:
            ALIASES[key] = name


def unregister_platform(name: str) -> None:
    """Forget a registered platform and its aliases (a built-in one cannot be removed).

    Raises:
        ConfigError: a built-in platform. UnknownNameError: no such registered platform.
    """
    key = _normalise(name)
    key = ALIASES.get(key, key)
    if key in BUILTIN_PLATFORMS:
        raise ConfigError(f"platform {key!r} is built in; it cannot be unregistered")
    if key not in PLATFORMS:
        raise UnknownNameError(f"no registered platform {name!r}")
    del PLATFORMS[key]
    for alias in [a for a, target in ALIASES.items() if target == key]:
        del ALIASES[alias]
