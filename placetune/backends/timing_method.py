"""The one way both real backends time an engine: one inference in flight, CUDA events around each enqueue.

Engine mode, in the tensorrt worker (``worker_time.time_engine``) and in trtexec alike:

* **latency** of a query: from an event recorded on the engine's stream just before
  ``enqueueV3`` / ``execute_async_v3`` to an event recorded just after it, the host waiting for
  that second event before it enqueues the next query. One query is in flight at a time.
* **throughput**: queries of that same loop divided by the host wall time from the first
  timed enqueue to the last completion (trtexec's "Throughput", sampleReporting.cpp
  ``printMetricExplanations``: "the number of queries by the Total Host Walltime").
* no host<->device copies (the inputs are uploaded once before timing), no CUDA graph,
  a 200 ms warm-up (trtexec's ``--warmUp`` default) before the timed queries.
* the engine's input and output tensors in managed memory on an integrated GPU (a Jetson), device
  memory on a discrete one: trtexec's ``useManagedMemory{(inference.skipTransfers && isIntegrated) ||
  inference.useManaged}`` (sampleInference.cpp release/10.3:262-264), the worker's ``io_managed``.
* trtexec's figure is the median of its ``--exportTimes`` ``latencyMs`` (h2d + compute + d2h,
  sampleReporting.h release/10.3:59-62), which ``--noDataTransfers`` makes the compute span between the
  events around the enqueue (``getTrace``, sampleInference.cpp release/10.3:935-950): the worker's.

Why trtexec needs ``--exposeDMA`` for this (TensorRT sources, samples/common/):

* ``Iteration`` keeps ``mDepth(1 + inference.overlap)`` query slots: sampleInference.cpp
  release/8.5:665, release/8.6:704, release/10.3:790, release/10.13:1062, release/10.16:1125,
  release/11.0:1119, release/11.1:1135; ``overlap`` defaults to true (sampleOptions.h
  ``bool overlap{true};``, every release branch).
* ``inferenceLoop`` (release/10.3 sampleInference.cpp:1028-1087) calls ``query`` (records
  ``kCOMPUTE_S``, enqueues, records ``kCOMPUTE_E``, then ``moveNext``) and then ``sync`` of the
  *other* slot: with depth 2 the next query is enqueued while the previous one still runs, so
  its ``kCOMPUTE_S`` is reached only when the GPU finishes the previous query and the host's
  enqueue time is hidden. trtexec's default "GPU Compute Time" (and, with
  ``--noDataTransfers``, its "Latency" and ``--exportTimes`` ``latencyMs``, which then equal the
  compute span: ``getTrace``) is therefore shorter than a one-at-a-time measurement by up to the
  host's enqueue time of one query.
* ``--exposeDMA`` sets ``overlap = !exposeDMA`` (sampleOptions.cpp release/8.5:1089-1091,
  release/8.6:1298-1300, release/10.3:1610-1612, release/10.13:1688-1690,
  release/10.16:1741-1743, release/11.0:1454-1456, release/11.1:1680-1682): depth 1, ``query``
  then ``sync`` of the same slot, exactly the worker's loop.
* ``--noDataTransfers`` (before 11; 11 skips the copies by default), ``--useSpinWait`` (before
  11; 11 spins by default; spinning changes when the host sees an event, never the events' own
  timestamps) and no ``--useCudaGraph`` (``--noCudaGraph`` on 11, which captures by default):
  :mod:`placetune.backends.trtexec.command`.

Replicas mode keeps two queries in flight per instance in both backends (the worker's
``queue_depth`` 2, trtexec's default overlap): there the figure is throughput. Pipeline mode is
the tensorrt backend's only. docs/timing.md says the same for users.
"""

from __future__ import annotations

__all__ = ["ENGINE_TIMED", "REPLICAS_TIMED"]

#: ``Measurement.extra["timed"]`` of an engine-mode measurement of either real backend.
ENGINE_TIMED = ("one query in flight: CUDA events just before and after each enqueue on the engine's stream, "
                "no host<->device copies, no CUDA graph (trtexec: --exposeDMA --noDataTransfers); throughput = "
                "queries / host wall time of that loop")
#: ``Measurement.extra["timed"]`` of a replicas-mode measurement of either real backend.
REPLICAS_TIMED = ("every instance at once, two queries in flight each (trtexec's default overlap), no "
                  "host<->device copies; throughput = queries finished in the common window")
