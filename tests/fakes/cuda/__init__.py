"""Test double of cuda-python (``cuda.bindings``): the driver API subset placetune's CUDA layer and
tests/test_cuda_layer.py call, on the asynchronous fake GPU of ``_fakegpu``.

Off unless ``PLACETUNE_FAKE_CUDA_PYTHON`` is set (then ``import cuda`` works): the workers of the
other tests keep using the pycuda double, as a machine with only pycuda would.
"""

import os

if not os.environ.get("PLACETUNE_FAKE_CUDA_PYTHON"):
    raise ImportError("cuda-python is not installed here (the cuda-python double is off: set "
                      "PLACETUNE_FAKE_CUDA_PYTHON=1)")
