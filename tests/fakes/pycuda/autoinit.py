"""``import pycuda.autoinit``: init + a context on device 0 (like the real module)."""

from . import driver as _driver

_driver.init()
context = _driver.Device(0).make_context()
device = context.get_device()
