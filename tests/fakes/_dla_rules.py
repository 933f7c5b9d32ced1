"""The DLA rules both TensorRT doubles apply to a classifier's head, in one place.

``tests/fakes/tensorrt`` (the Python API the worker drives) and ``tests/fakes/trtexec`` decide on their own
tables which layer types a DLA core takes (docs/doubles.md); the fully connected head and the flatten before
it depend on shapes, constants, consumers and the TensorRT version, and both doubles ask these functions,
so that the worker's engine and trtexec's engine of one plan hold the same DLA loadables.

What they rest on (tests/data/trt_corpus):

* A 2-D Gemm/MatMul with constant weights runs on the DLA: TensorRT's builder runs it as a 1x1 convolution
  (``IFullyConnectedLayer`` in ``include/NvInfer.h`` of release/8.5 and 8.6: "If executing this layer on DLA,
  number of output channels must in the range [1,8192]"; the ONNX parser makes a MatrixMultiply of every
  Gemm, onnx-tensorrt 8.5-GA/8.6-GA ``builtin_op_importers.cpp`` "GEMM must have 2D inputs!"). Published
  builds: 8.4 ``{ForeignNode[Conv_0...Gemm_15]}`` (jetson_dla_tutorial README step 9), 8.5.2
  ``{ForeignNode[/linear/Gemm]}`` (``dlatutorial-repro-orin64-8.5.2-model-bn``), 10.3.0 ResNet-50 on an AGX
  Orin ``{ForeignNode[/fc/Gemm + (Unnamed Layer* 125) [ElementWise]]}`` (``orin-agx-trt10.3-dla-offloaded``).
  On a 3-D/4-D activation, with two runtime inputs or a transposed activation no published build ran one on
  the DLA: the doubles keep those on the GPU (placetune's rules do too).
* The flatten ``(N, C, 1, 1) -> (N, C)`` feeding only such layers: before TensorRT 10 inside the Gemm's DLA
  loadable (8.4's ``{ForeignNode[Conv_0...Gemm_15]}`` spans the tutorial's ``Flatten_9``; 8.5.2 lists it in
  neither section); from TensorRT 10 on the GPU: the same 10.3.0 build warns ``Layer '/Flatten' (SHUFFLE):
  Unsupported on DLA. Switching ... to GPU.`` (``orin-notes-ko-10.3-indented-elided-switching-warnings``).
  11.x: no published DLA build; the doubles keep 10.x's rule (an assumption).
* A Slice (an ONNX Slice, or a Split, which the ONNX parser imports as one Slice per output): ``ISliceLayer``
  in ``include/NvInfer.h``, the same in every release from 8.4 to 11.1: "start, size, and stride are build
  time constants", "Strides are 1 for all dimensions", "Slicing is not performed on the first dimension",
  "The input tensor has four dimensions" (10.3 adds: "axes, if provided, are build time constants"). The
  slice mode: kDEFAULT only in 8.4-8.6, kSTRICT_BOUNDS only in 10.0-10.3, kDEFAULT, kWRAP or kFILL (its fill
  value a 0 constant read by nothing else) from 10.4; ONNX Slice and Split import in the default mode
  (onnx-tensorrt's ``addSlice``), in every version. The double's other SLICE layers stay on the GPU: Expand
  (a stride of 0), Tile (kWRAP) and Pad (kFILL, whose fill constant the doubles do not follow).

Shapes are tuples of ints, ``-1`` (or None) for a size left open.
"""

from __future__ import annotations

from collections.abc import Sequence

#: the most output channels a DLA convolution / fully connected layer takes (NvInfer.h release/8.5, 8.6)
MAX_OUTPUTS = 8192


def fully_connected(a_shape: Sequence, a_const: bool, b_shape: Sequence, b_const: bool, trans_a: bool,
                    out_shape: Sequence) -> bool:
    """A Gemm/MatMul the DLA runs: a 2-D ``[N, K]`` runtime activation, 2-D constant weights, no transposed
    activation, 1..8192 outputs."""
    if trans_a or a_const or not b_const or len(a_shape) != 2 or len(b_shape) != 2 or not out_shape:
        return False
    k = out_shape[-1]
    return k is not None and 1 <= int(k) <= MAX_OUTPUTS


def fc_flatten(major: int, in_shape: Sequence, out_shape: Sequence, consumers_fc: Sequence[bool]) -> bool:
    """The view before a classifier's Gemm, ``(N, C, 1, 1) -> (N, C)`` read only by fully connected layers
    (``consumers_fc``: one flag per layer reading its output): the DLA takes it before TensorRT 10 only."""
    if major >= 10 or len(in_shape) != 4 or len(out_shape) != 2 or tuple(in_shape[2:]) != (1, 1):
        return False
    open_ = (None, -1)
    if any(a != b and a not in open_ and b not in open_ for a, b in zip(in_shape[:2], out_shape)):
        return False
    return bool(consumers_fc) and all(consumers_fc)



def slice_(op: str, in_shape: Sequence, out_shapes: Sequence[Sequence], params_const: bool,
           steps: Sequence | None, axis: int | None = None, axes: Sequence | None = None) -> bool:
    """An ONNX Slice or Split the DLA runs (``ISliceLayer``'s DLA constraints, module docstring): a 4-D
    input, build-time constant parameters, every step 1 (``steps``: None when the op has none, i.e. all 1),
    the first dimension not sliced (``axis``: a Split's axis; ``axes``: a Slice's axes where the file gives
    them, else every output must keep the input's first dimension)."""
    if op not in ("Slice", "Split") or not params_const or len(in_shape) != 4 or not out_shapes:
        return False
    if steps is not None and any(int(s) != 1 for s in steps):
        return False
    if op == "Split":
        return axis is not None and axis % 4 != 0
    if axes is not None:
        return all(int(a) % 4 != 0 for a in axes)
    return all(o is not None and len(o) == 4 and o[0] == in_shape[0] for o in out_shapes)
