"""Jetson power modes (``nvpmodel``) per module, transcribed from NVIDIA's own nvpmodel files.

An nvpmodel configuration file (``/etc/nvpmodel/nvpmodel_<module>.conf`` on the board) defines
each power mode as a set of caps: CPU cores online and their maximum clock, the GPU's maximum
clock (``GPU MAX_FREQ``, Hz), the GPU TPCs that are power-gated (``TPC_PG_MASK``: a set bit
gates a TPC), the memory controller's maximum clock (``EMC MAX_FREQ``) and each DLA core's
maximum clock (``DLA0_CORE`` / ``DLA1_CORE MAX_FREQ``). ``-1`` means no cap (the file's header:
"-1 is taken as INT_MAX"); ``0`` for EMC is read as no cap too (UNVERIFIED reading: the same
AGX Orin MAXN line says ``EMC MAX_FREQ 0`` in the older file and ``-1`` in the newer one).
``PM_CONFIG DEFAULT`` is the mode a freshly flashed board boots in.

Source: NVIDIA's files as stored in the public repositories ``LineageOS/android_device_nvidia_concord``
(Orin, ``nvpmodel_p3701_*`` / ``nvpmodel_p3767_*``) and ``LineageOS/android_device_nvidia_galen``
(Xavier, ``nvpmodel_t194.conf`` for AGX Xavier and ``nvpmodel_t194_p3668.conf`` for Xavier NX,
the file-to-module pairing as in ``anduril/jetpack-nixos`` ``modules/devices.nix``) under
``nvpmodel/`` (NVIDIA copyright headers), at the commit named per module below. Only the
figures are transcribed here (the Orin Nano 4GB ones too, which no placetune profile follows). What "no cap"
means in MHz is the module's own maximum, which the files do not give: those come from
placetune/data/jetson-measurements.md §1 ("ref §1") or NVIDIA's module datasheets, each named
below; ones not checked are marked UNVERIFIED (the Orin NX ``_super`` files' uncapped GPU and DLA
clocks have no source here: their highest cap in the file is read as the maximum, a lower bound).

JetPack 6.2 (L4T R36.4.3) installs a module's ``_super`` file where the board is flashed for the
Super modes; an older JetPack the other one. One rule picks the table (:func:`modes_of`): a
profile's own file first, and a mode name that file lacks is looked up in the module's ``_super``
file (:data:`SUPER_MODULE`), so an Orin NX board in ``MAXN_SUPER`` or ``40W`` is known to the
``orin-nx-16gb`` profile. A name both files have (``15W``) is the profile's own file's mode. A
Super mode is scaled against the profile's own fastest mode (:func:`power_scale`), whose clocks
the profile's peak figures are, so ``MAXN_SUPER`` runs faster than ``MAXN`` (scales above 1).

The simulator (:mod:`placetune.backends.simulate.costs`) scales from these caps: GPU compute by
active TPCs x GPU clock, the DLA by its clock and memory bandwidth by the EMC clock, each relative
to the module's fastest mode (:meth:`ModuleModes.scale`).

Example:
    >>> from placetune.hardware.power_modes import modes_of
    >>> m = modes_of("orin-agx")
    >>> m.names
    ('MAXN', '15W', '30W', '50W')
    >>> s = m.scale("30W")
    >>> round(s.gpu, 3), round(s.dla, 3), s.emc
    (0.235, 0.856, 1.0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["PowerMode", "ModuleModes", "ClockScale", "MODULES", "PLATFORM_MODULE", "SUPER_MODULE", "modes_of",
           "mode_names", "super_names", "power_scale", "MAXN_SCALE", "same_power_mode"]

_REPO = "LineageOS/android_device_nvidia_concord"
_C_AGX = "0a7ce0b3cb5f72b34f1f3eab1456572991f13cc2"  # nvpmodel_p3701_0000.conf, _0004.conf
_C_P3767 = "640733e607499e9bb841d200638996680e5dd47b"  # nvpmodel_p3767_0000/_0001/_0003.conf
_C_P3767_4 = "ca8f5dca8bbb182174c9ad64ba88ad83849e9d78"  # nvpmodel_p3767_0004.conf
_C_SUPER = "370b63a8dbe954cd5f2da0c24694a1af5796612f"  # nvpmodel_p3767_*_super.conf (JetPack 6.2)
_REPO_T194 = "LineageOS/android_device_nvidia_galen"
_C_T194 = "51d9adcb2676183d2ac6aa4eb04a8636183fbcce"  # nvpmodel_t194.conf, nvpmodel_t194_p3668.conf


class ClockScale(NamedTuple):
    """How a power mode slows each clock domain, relative to the module's fastest mode (1.0 = as fast).

    Attributes:
        gpu: GPU compute rate: active TPCs x GPU clock.
        gpu_clock: the GPU clock alone (what a kernel's fixed costs and its occupancy ramp scale with).
        dla: DLA core clock.
        emc: memory (EMC) clock, i.e. DRAM bandwidth.
    """

    gpu: float
    gpu_clock: float
    dla: float
    emc: float

    @classmethod
    def uniform(cls, factor: float) -> "ClockScale":
        """Every domain scaled by one factor (the estimate for modules without a transcribed table)."""
        f = float(factor)
        return cls(f, f, f, f)


#: The fastest mode of any module.
MAXN_SCALE = ClockScale(1.0, 1.0, 1.0, 1.0)


@dataclass(frozen=True)
class PowerMode:
    """One ``POWER_MODEL`` of an nvpmodel file.

    Attributes:
        id: the mode's id (``nvpmodel -m <id>``).
        name: its name as nvpmodel prints it (``MAXN``, ``MODE_30W``, ``15W``, ``MAXN_SUPER``).
        cpu_online: CPU cores online.
        cpu_max_khz: CPU maximum clock, kHz (None: no cap).
        gpu_max_hz: GPU maximum clock, Hz (None: no cap).
        tpc_pg_mask: power-gated GPU TPCs (bit i set: TPC i off).
        emc_max_hz: memory controller maximum clock, Hz (None: no cap).
        dla_max_hz: per DLA core maximum clock, Hz (None: no cap); empty without DLA.
    """

    id: int
    name: str
    cpu_online: int
    cpu_max_khz: int | None
    gpu_max_hz: int | None
    tpc_pg_mask: int
    emc_max_hz: int | None
    dla_max_hz: tuple[int | None, ...] = ()

    @property
    def label(self) -> str:
        """The name placetune shows: ``MODE_30W`` -> ``30W`` (AGX Orin's files prefix ``MODE_``)."""
        return self.name[len("MODE_"):] if self.name.startswith("MODE_") else self.name

    @property
    def active_tpcs(self) -> int:
        """TPCs not power-gated, of the 8 the mask's low byte describes."""
        return 8 - bin(self.tpc_pg_mask & 0xFF).count("1")


@dataclass(frozen=True)
class ModuleModes:
    """The power modes of one Jetson module.

    Attributes:
        module: NVIDIA's module id (``p3701-0000``).
        title: the module's name.
        conf: the nvpmodel file and where it was read (repository path @ commit).
        gpu_max_mhz, dla_max_mhz, emc_max_mhz: the uncapped clocks (a ``-1`` cap), with ``maxima_source``.
        modes: every mode, in the file's order.
        default_id: ``PM_CONFIG DEFAULT``.
        verified: whether the uncapped clocks were checked against a published source.
        tpcs: GPU TPCs of the chip that ``TPC_PG_MASK``'s low bits describe (Orin files: 8;
            Xavier's GV11B: 4).
        fastest_id: the fastest mode where the file has no ``MAXN`` and its default is not the
            fastest (Xavier NX: the 20W modes); None: :attr:`fastest`'s rule.
    """

    module: str
    title: str
    conf: str
    gpu_max_mhz: float
    dla_max_mhz: float | None
    emc_max_mhz: float
    maxima_source: str
    modes: tuple[PowerMode, ...]
    default_id: int
    verified: bool = True
    tpcs: int = 8
    fastest_id: int | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """Mode labels, in the file's order."""
        return tuple(m.label for m in self.modes)

    @property
    def default(self) -> PowerMode:
        """The mode the board boots in (``PM_CONFIG DEFAULT``)."""
        return next(m for m in self.modes if m.id == self.default_id)

    @property
    def fastest(self) -> PowerMode:
        """``MAXN`` (or ``MAXN_SUPER``) where the module has one, else :attr:`fastest_id` where set
        (Xavier NX), else its default mode (Orin Nano: its 15W / 10W mode has no cap)."""
        if self.fastest_id is not None:
            return next(m for m in self.modes if m.id == self.fastest_id)
        return next((m for m in self.modes if m.name in ("MAXN", "MAXN_SUPER")), self.default)

    def active_tpcs(self, mode: PowerMode) -> int:
        """TPCs of ``mode`` not power-gated, of the module's :attr:`tpcs`."""
        return self.tpcs - bin(mode.tpc_pg_mask & ((1 << self.tpcs) - 1)).count("1")

    def mode(self, name: str) -> PowerMode | None:
        """The mode called ``name`` (label, nvpmodel name or ``MAXN`` for :attr:`fastest`; any case)."""
        key = str(name).strip().upper()
        for m in self.modes:
            if key in (m.name.upper(), m.label.upper()):
                return m
        return self.fastest if key == "MAXN" else None

    def clocks_mhz(self, mode: PowerMode) -> tuple[float, float | None, float]:
        """(GPU, DLA0, EMC) clocks of ``mode`` in MHz: its caps, or the module's maxima where uncapped
        (no DLA clock on a module without a DLA)."""
        def cap(hz: int | None, top: float) -> float:
            return top if hz is None else min(top, hz / 1e6)

        dla = (cap(mode.dla_max_hz[0], self.dla_max_mhz) if mode.dla_max_hz and self.dla_max_mhz is not None
               else None)
        return cap(mode.gpu_max_hz, self.gpu_max_mhz), dla, cap(mode.emc_max_hz, self.emc_max_mhz)

    def scale(self, name: str, against: "ModuleModes | None" = None) -> ClockScale | None:
        """How much slower ``name`` runs each clock domain than :attr:`fastest`; None: no such mode.

        ``against``: the table whose fastest mode is 1.0 (a profile's own file, for a mode of its
        module's ``_super`` file: above 1 where the Super mode is faster); this table by default.
        The DLA figure is DLA0's clock: the simulator runs both cores at one clock (two modes cap
        DLA1 lower than DLA0: Orin NX 10W and the Orin NX 16GB Super 15W)."""
        mode = self.mode(name)
        if mode is None:
            return None
        ref = against or self
        top = ref.fastest
        g, d, e = self.clocks_mhz(mode)
        g0, d0, e0 = ref.clocks_mhz(top)
        clock = g / g0
        return ClockScale(gpu=self.active_tpcs(mode) / ref.active_tpcs(top) * clock, gpu_clock=clock,
                          dla=(d / d0) if d is not None and d0 else 1.0, emc=e / e0)


def _m(id_: int, name: str, cores: int, cpu_khz: int, gpu_hz: int, mask: int, emc_hz: int,
       *dla_hz: int) -> PowerMode:
    """A mode as the file writes it (-1, and 0 for EMC, mean no cap)."""
    def cap(v: int) -> int | None:
        return None if v in (-1, 0) else v

    return PowerMode(id_, name, cores, cap(cpu_khz), cap(gpu_hz), mask, cap(emc_hz), tuple(cap(v) for v in dla_hz))


MODULES: dict[str, ModuleModes] = {m.module: m for m in (
    ModuleModes(
        module="p3701-0000", title="Jetson AGX Orin (developer kit module, 12 CPU cores, 8 TPCs)",
        conf=f"{_REPO}: nvpmodel/nvpmodel_p3701_0000.conf @ {_C_AGX}",
        # ref §1: GPU 1.3 GHz (1301 MHz in NVIDIA's AGX Orin 64GB module data), DLA 1.6 GHz, 204.8 GB/s
        # = LPDDR5 256-bit at EMC 3200 MHz (x2 transfers x 32 bytes)
        gpu_max_mhz=1301.0, dla_max_mhz=1600.0, emc_max_mhz=3200.0,
        maxima_source="ref §1 (AGX Orin 64GB: GPU 1.3 GHz, DLA 1.6 GHz, 204.8 GB/s)",
        modes=(
            _m(0, "MAXN", 12, -1, -1, 0, -1, -1, -1),
            _m(1, "MODE_15W", 4, 1113600, 408000000, 248, 2133000000, 614400000, 614400000),
            _m(2, "MODE_30W", 8, 1728000, 612000000, 240, -1, 1369600000, 1369600000),
            _m(3, "MODE_50W", 12, 1497600, 816000000, 0, -1, 1369600000, 1369600000),
        ),
        default_id=2,
    ),
    ModuleModes(
        module="p3701-0004", title="Jetson AGX Orin 32GB (8 CPU cores, 7 TPCs)",
        conf=f"{_REPO}: nvpmodel/nvpmodel_p3701_0004.conf @ {_C_AGX}",
        gpu_max_mhz=930.0, dla_max_mhz=1400.0, emc_max_mhz=3200.0,
        maxima_source="UNVERIFIED (NVIDIA's AGX Orin 32GB figures: GPU 930 MHz, DLA 1.4 GHz, 204.8 GB/s)",
        modes=(
            _m(0, "MAXN", 8, -1, -1, 128, -1, -1, -1),
            _m(1, "MODE_15W", 4, 1113600, 408000000, 248, 2133000000, 614400000, 614400000),
            _m(2, "MODE_30W", 8, 1728000, 612000000, 240, -1, 1369600000, 1369600000),
            _m(3, "MODE_40W", 8, 1497600, 816000000, 128, -1, 1228800000, 1228800000),
        ),
        default_id=2, verified=False,
    ),
    ModuleModes(
        module="p3767-0000", title="Jetson Orin NX 16GB (8 CPU cores, 4 TPCs)",
        conf=f"{_REPO}: nvpmodel/nvpmodel_p3767_0000.conf @ {_C_P3767}",
        gpu_max_mhz=918.0, dla_max_mhz=614.4, emc_max_mhz=3199.0,
        maxima_source="ref §1 (Orin NX 16GB: GPU 918 MHz, DLA 614 MHz, 102.4 GB/s = 128-bit at EMC 3199 MHz)",
        modes=(
            _m(0, "MAXN", 8, -1, -1, 240, 0, -1, -1),
            _m(1, "10W", 4, 1190400, 612000000, 252, 2133000000, 153600000, 115000000),
            _m(2, "15W", 4, 1651200, 612000000, 252, 0, 614400000, 614400000),
            _m(3, "25W", 8, 1497600, 408000000, 240, 0, 614400000, 614400000),
        ),
        default_id=2,
    ),
    ModuleModes(
        module="p3767-0000-super", title="Jetson Orin NX 16GB Super (JetPack 6.2 modes)",
        conf=f"{_REPO}: nvpmodel/nvpmodel_p3767_0000_super.conf @ {_C_SUPER}",
        # MAXN_SUPER caps nothing; no source here gives the Super GPU and DLA maxima: the file's highest
        # caps (40W: GPU 1173 MHz, DLA 908.8 MHz) are read as them, a lower bound. EMC: the same
        # 128-bit bus as p3767-0000 (ref §1: 102.4 GB/s).
        gpu_max_mhz=1173.0, dla_max_mhz=908.8, emc_max_mhz=3199.0,
        maxima_source="EMC: ref §1 (102.4 GB/s); GPU 1173 MHz and DLA 908.8 MHz UNVERIFIED (the file's 40W caps "
                      "read as the MAXN_SUPER maxima: a lower bound)",
        modes=(
            _m(0, "MAXN_SUPER", 8, -1, -1, 240, -1, -1, -1),
            _m(1, "10W", 4, 1190400, 612000000, 252, 2133000000, 153600000, 115000000),
            _m(2, "15W", 4, 1420800, 612000000, 252, -1, 614400000, 115000000),
            _m(3, "25W", 8, 1497600, 408000000, 240, -1, 614400000, 614400000),
            _m(4, "40W", 8, 1497600, 1173000000, 240, -1, 908800000, 908800000),
        ),
        default_id=4, verified=False,
    ),
    ModuleModes(
        module="p3767-0001", title="Jetson Orin NX 8GB (6 CPU cores, 4 TPCs)",
        conf=f"{_REPO}: nvpmodel/nvpmodel_p3767_0001.conf @ {_C_P3767}",
        gpu_max_mhz=765.0, dla_max_mhz=614.4, emc_max_mhz=3199.0,
        maxima_source="EMC: ref §1 (102.4 GB/s); GPU 765 MHz and DLA 614 MHz UNVERIFIED (NVIDIA's Orin NX 8GB "
                      "figures, not in ref §1)",
        modes=(
            _m(0, "MAXN", 6, -1, -1, 240, 0, -1, -1),
            _m(1, "10W", 4, 1190400, 612000000, 252, 2133000000, 153600000, 153600000),
            _m(2, "15W", 4, 1420800, 612000000, 252, 0, 614400000, 614400000),
            _m(3, "20W", 6, 1497600, 408000000, 240, 0, 614400000, 614400000),
        ),
        default_id=2, verified=False,
    ),
    ModuleModes(
        module="p3767-0001-super", title="Jetson Orin NX 8GB Super (JetPack 6.2 modes)",
        conf=f"{_REPO}: nvpmodel/nvpmodel_p3767_0001_super.conf @ {_C_SUPER}",
        # as p3767-0000-super: the file's 40W caps (GPU 1173 MHz, DLA 1203.2 MHz) read as the maxima
        gpu_max_mhz=1173.0, dla_max_mhz=1203.2, emc_max_mhz=3199.0,
        maxima_source="EMC: ref §1 (102.4 GB/s); GPU 1173 MHz and DLA 1203.2 MHz UNVERIFIED (the file's 40W caps "
                      "read as the MAXN_SUPER maxima: a lower bound)",
        modes=(
            _m(0, "MAXN_SUPER", 6, -1, -1, 240, -1, -1, -1),
            _m(1, "10W", 4, 1190400, 612000000, 252, 2133000000, 153600000, 153600000),
            _m(2, "15W", 4, 1420800, 612000000, 252, -1, 614400000, 614400000),
            _m(3, "20W", 6, 1497600, 408000000, 240, -1, 614400000, 614400000),
            _m(4, "40W", 6, 1984000, 1173000000, 240, -1, 1203200000, 1203200000),
        ),
        default_id=4, verified=False,
    ),
    ModuleModes(
        module="p3767-0003", title="Jetson Orin Nano 8GB (6 CPU cores, 4 TPCs; JetPack 5 / 6.0-6.1 modes)",
        conf=f"{_REPO}: nvpmodel/nvpmodel_p3767_0003.conf @ {_C_P3767}",
        # Orin Nano datasheet: GPU "Maximum Operating Frequency: 625 MHz"; ref §1: 68 GB/s = 128-bit at 2133 MHz
        gpu_max_mhz=625.0, dla_max_mhz=None, emc_max_mhz=2133.0,
        maxima_source="ref §1 (68 GB/s); NVIDIA Orin Nano datasheet (GPU 625 MHz)",
        modes=(
            _m(0, "15W", 6, -1, -1, 240, 0),
            _m(1, "7W", 4, 960000, 408000000, 252, 2133000000),
        ),
        default_id=0,
    ),
    ModuleModes(
        module="p3767-0003-super", title="Jetson Orin Nano 8GB Super (JetPack 6.2 modes)",
        conf=f"{_REPO}: nvpmodel/nvpmodel_p3767_0003_super.conf @ {_C_SUPER}",
        gpu_max_mhz=1020.0, dla_max_mhz=None, emc_max_mhz=3199.0,
        maxima_source="ref §1 (102 GB/s Super); GPU 1020 MHz per NVIDIA's Orin Nano Super datasheet (UNVERIFIED "
                      "here: a third-party summary of it)",
        modes=(
            _m(0, "15W", 6, 1497600, 612000000, 240, 2133000000),
            _m(1, "25W", 6, 1344000, 918000000, 240, 3199000000),
            _m(2, "MAXN_SUPER", 6, -1, -1, 240, -1),
        ),
        default_id=1,
    ),
    ModuleModes(
        module="p3767-0004", title="Jetson Orin Nano 4GB (6 CPU cores, 2 TPCs)",
        conf=f"{_REPO}: nvpmodel/nvpmodel_p3767_0004.conf @ {_C_P3767_4}",
        gpu_max_mhz=625.0, dla_max_mhz=None, emc_max_mhz=2133.0,
        maxima_source="UNVERIFIED (as Orin Nano 8GB: GPU 625 MHz; 64-bit memory at 2133 MHz)",
        modes=(
            _m(0, "10W", 6, -1, -1, 252, 0),
            _m(1, "7W_AI", 4, 806400, 408000000, 252, 2133000000),
            _m(2, "7W_CPU", 4, 960000, 306000000, 252, 2133000000),
        ),
        default_id=0, verified=False,
    ),
    ModuleModes(
        module="p3767-0004-super", title="Jetson Orin Nano 4GB Super (JetPack 6.2 modes)",
        conf=f"{_REPO}: nvpmodel/nvpmodel_p3767_0004_super.conf @ {_C_SUPER}",
        # MAXN_SUPER caps nothing; as for the Orin NX _super files, the file's highest caps (25W: GPU 1020 MHz,
        # EMC 3199 MHz) are read as the maxima. 2 TPCs in every mode (TPC_PG_MASK 252), as in the older 4GB file.
        gpu_max_mhz=1020.0, dla_max_mhz=None, emc_max_mhz=3199.0,
        maxima_source="UNVERIFIED (the file's 25W caps, GPU 1020 MHz and EMC 3199 MHz, read as the MAXN_SUPER "
                      "maxima: a lower bound)",
        modes=(
            _m(0, "10W", 6, 1497600, 612000000, 252, 2133000000),
            _m(1, "25W", 6, 1728000, 1020000000, 252, 3199000000),
            _m(2, "MAXN_SUPER", 6, -1, -1, 252, -1),
        ),
        default_id=1, verified=False,
    ),
    ModuleModes(
        module="p2888", title="Jetson AGX Xavier (8 CPU cores, 4 TPCs)",
        conf=f"{_REPO_T194}: nvpmodel/nvpmodel_t194.conf @ {_C_T194}",
        # ref §1: GPU 1377 MHz, DLA 1.4 GHz, 136.5 GB/s = LPDDR4x 256-bit at EMC 2133 MHz (x2 x 32 bytes);
        # 512 cores = 8 SMs = 4 TPCs. "EMC MAX_FREQ 0" at MAXN: no cap (as the Orin files).
        gpu_max_mhz=1377.0, dla_max_mhz=1400.0, emc_max_mhz=2133.0,
        maxima_source="ref §1 (AGX Xavier: GPU 1377 MHz, DLA 1.4 GHz, 136.5 GB/s)",
        modes=(
            _m(0, "MAXN", 8, -1, -1, 0, 0, -1, -1),
            _m(1, "MODE_10W", 2, 1200000, 520000000, 5, 1065600000, 550000000, 550000000),
            _m(2, "MODE_15W", 4, 1200000, 670000000, 0, 1331200000, 750000000, 750000000),
            _m(3, "MODE_30W_ALL", 8, 1200000, 900000000, 0, 1600000000, 1050000000, 1050000000),
            _m(4, "MODE_30W_6CORE", 6, 1450000, 900000000, 0, 1600000000, 1050000000, 1050000000),
            _m(5, "MODE_30W_4CORE", 4, 1780000, 900000000, 0, 1600000000, 1050000000, 1050000000),
            _m(6, "MODE_30W_2CORE", 2, 2100000, 900000000, 0, 1600000000, 1050000000, 1050000000),
            _m(7, "MODE_15W_DESKTOP", 4, 2188800, 670000000, 0, 1331200000, 115200000, 115200000),
        ),
        default_id=7, tpcs=4,
    ),
    ModuleModes(
        module="p3668", title="Jetson Xavier NX (6 CPU cores, 3 of 4 TPCs)",
        conf=f"{_REPO_T194}: nvpmodel/nvpmodel_t194_p3668.conf @ {_C_T194}",
        # ref §1: GPU 1100 MHz (the file's 1109.25 MHz cap is read as the module's maximum), DLA 1.1 GHz,
        # 59.7 GB/s = LPDDR4x 128-bit at EMC 1866 MHz (x2 x 16 bytes); 384 cores = 6 SMs = 3 TPCs: every
        # mode gates TPC 0 of the chip's 4 (TPC_PG_MASK 1). No MAXN in this file: the 20W modes are fastest.
        gpu_max_mhz=1100.0, dla_max_mhz=1100.0, emc_max_mhz=1866.0,
        maxima_source="ref §1 (Xavier NX: GPU 1100 MHz, DLA 1.1 GHz, 59.7 GB/s)",
        modes=(
            _m(0, "MODE_15W_2CORE", 2, 1907200, 1109250000, 1, 1600000000, 1100800000, 1100800000),
            _m(1, "MODE_15W_4CORE", 4, 1420800, 1109250000, 1, 1600000000, 1100800000, 1100800000),
            _m(2, "MODE_15W_6CORE", 6, 1420800, 1109250000, 1, 1600000000, 1100800000, 1100800000),
            _m(3, "MODE_10W_2CORE", 2, 1497600, 803250000, 1, 1600000000, 896000000, 896000000),
            _m(4, "MODE_10W_4CORE", 4, 1190400, 803250000, 1, 1600000000, 896000000, 896000000),
            _m(5, "MODE_10W_DESKTOP", 4, 1907200, 510000000, 1, 1600000000, 896000000, 896000000),
            _m(6, "MODE_20W_2CORE", 2, 1907200, 1109250000, 1, 1866000000, 1100800000, 1100800000),
            _m(7, "MODE_20W_4CORE", 4, 1420800, 1109250000, 1, 1866000000, 1100800000, 1100800000),
            _m(8, "MODE_20W_6CORE", 6, 1420800, 1109250000, 1, 1866000000, 1100800000, 1100800000),
        ),
        default_id=5, tpcs=4, fastest_id=8,
    ),
)}

#: placetune platform -> the module whose nvpmodel file it follows. AGX Orin 64GB (p3701-0005)
#: follows the developer kit module's file (p3701-0000: the same 12 cores and 8 TPCs); the
#: repository holds no p3701_0005 file (UNVERIFIED that it is the same).
PLATFORM_MODULE: dict[str, str] = {
    "orin-agx": "p3701-0000",
    "orin-nx-16gb": "p3767-0000",
    "orin-nx-8gb": "p3767-0001",
    "orin-nano": "p3767-0003",
    "orin-nano-super": "p3767-0003-super",
    "xavier-agx": "p2888",
    "xavier-nx": "p3668",
}


#: placetune platform -> its module's JetPack 6.2 ``_super`` nvpmodel file, where the profile's own file
#: (:data:`PLATFORM_MODULE`) is the older one: the modes a Super-flashed board may run under that profile
#: (``orin-nano-super`` is the Orin Nano profile whose own file, and peak figures, are the Super ones).
SUPER_MODULE: dict[str, str] = {
    "orin-nx-16gb": "p3767-0000-super",
    "orin-nx-8gb": "p3767-0001-super",
    "orin-nano": "p3767-0003-super",
}


def modes_of(platform: str, mode: str | None = None) -> ModuleModes | None:
    """The transcribed power modes of a placetune platform (canonical name); None where placetune
    has no transcribed table (a platform outside :data:`PLATFORM_MODULE`).

    With ``mode``: the table that has it. The profile's own file first; a name that file lacks is
    looked up in the module's JetPack 6.2 ``_super`` file (:data:`SUPER_MODULE`); the profile's own
    table where neither has it.

    Example:
        >>> modes_of("orin-nx-16gb").module, modes_of("orin-nx-16gb", "MAXN_SUPER").module
        ('p3767-0000', 'p3767-0000-super')
        >>> modes_of("orin-nx-16gb", "15W").module
        'p3767-0000'
    """
    key = PLATFORM_MODULE.get(platform)
    if not key:
        return None
    table = MODULES[key]
    if mode is not None and table.mode(mode) is None and platform in SUPER_MODULE:
        other = MODULES[SUPER_MODULE[platform]]
        if other.mode(mode) is not None:
            return other
    return table


def super_names(platform: str) -> str:
    """``; JetPack 6.2 Super: <its _super file's modes>`` for a message, where the platform's module has
    a ``_super`` file other than the profile's own (:data:`SUPER_MODULE`); empty otherwise."""
    sup = SUPER_MODULE.get(platform)
    return f"; JetPack 6.2 Super: {', '.join(MODULES[sup].names)}" if sup else ""


def mode_names(platform: str) -> str:
    """The platform's modes as a line for a message: its own file's, then the ``_super`` file's
    (``MAXN, 10W, 15W, 25W; JetPack 6.2 Super: MAXN_SUPER, 10W, 15W, 25W, 40W``); empty without a table."""
    table = modes_of(platform)
    return ", ".join(table.names) + super_names(platform) if table is not None else ""


def power_scale(platform: str, mode: str) -> ClockScale | None:
    """How ``mode`` scales each clock domain against the profile's own fastest mode (1.0); None: no
    such mode or no table. A mode of the module's ``_super`` file scales against the profile's own
    file's fastest mode (:func:`modes_of`'s rule): above 1 where it runs faster."""
    base = modes_of(platform)
    if base is None:
        return None
    table = modes_of(platform, mode)
    assert table is not None
    return table.scale(mode) if table is base else table.scale(mode, against=base)


def same_power_mode(platform: str, board: str, study: str) -> bool:
    """Whether the mode ``nvpmodel -q`` names on the board (``board``) is the study's ``power_mode``.

    Compared as modes of the platform's nvpmodel file, not as text: AGX Orin's file names its
    30 W mode ``MODE_30W`` (what ``nvpmodel -q`` prints) while a study names it ``30W`` (the label
    :meth:`~placetune.hardware.platforms.Platform.check_power_mode` gives), and a study's ``MAXN``
    is the fastest mode, which Orin Nano's file calls ``15W`` and Xavier NX's ``MODE_20W_6CORE``.
    A name the file does not have is compared as text (any case, ``MODE_`` prefix dropped).

    Example:
        >>> same_power_mode("orin-agx", "MODE_30W", "30W"), same_power_mode("orin-nano", "15W", "MAXN")
        (True, True)
        >>> same_power_mode("orin-agx", "MODE_15W", "MAXN")
        False
    """
    board_table, study_table = modes_of(platform, board), modes_of(platform, study)
    if board_table is not None and study_table is not None:
        on_board, asked = board_table.mode(board), study_table.mode(study)
        if on_board is not None and asked is not None:
            return board_table is study_table and on_board.id == asked.id

    def norm(name: str) -> str:
        key = str(name).strip().upper()
        return key[len("MODE_"):] if key.startswith("MODE_") else key

    return norm(board) == norm(study)
