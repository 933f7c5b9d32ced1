"""One BLAS thread for a tuning run's own linear algebra (the guided agent's fits).

The guided agent solves hundreds of small systems (a few hundred unknowns) per run. numpy's
OpenBLAS starts a thread per core for each, whose threads wait for each other by spinning: on a
2-core machine a 420 x 420 solve took 2 ms of CPU in one thread and 48 ms with two, 20 times as
long, and 100 times on a busy machine (other processes, or a TensorRT build beside the tuner).
:func:`single_blas_thread` limits BLAS to one thread while an agent runs (``threadpoolctl``;
nothing happens where it is not installed) and restores the previous limits afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["single_blas_thread"]


@contextmanager
def single_blas_thread() -> Iterator[None]:
    """BLAS (numpy's OpenBLAS, MKL...) runs one thread inside the ``with`` block."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # an optional speed-up: the run is the same without it
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
