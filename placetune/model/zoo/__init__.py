"""Built-in networks written with :mod:`onnx.helper` (no downloads, deterministic, opset 17 or the export's).

The zoo gives placetune real network structures to analyse, search and export without a
model file: the seed scenarios (``seed-block``, ``model-gn``, ``model-bn``), the classic
Jetson benchmark networks (``alexnet``, ``googlenet``, ``resnet18/34/50/101/152``,
``mobilenetv1``, ``mobilenetv2``, ``vgg11/13/16/19``), a small segmentation network (``unet-small``), a
transformer stress model (``vit-tiny``) and the detectors Jetson users run behind cameras
(``yolov8n``, ``yolov8s``, ``yolo11n``, ``yolo11s`` and their instance segmenters ``yolov8n-seg``,
``yolov8s-seg``, ``yolo11n-seg``, ``yolo11s-seg``: Ultralytics' ONNX export; ``ssdlite-mobilenetv3``:
torchvision's SSDLite; each checked against a real export).

Every graph has one NCHW float32 input named ``input`` and one output named ``output`` (the
detectors keep their export's tensor names and opset: ``images`` -> ``output0``, the segmenters also
``output1``; SSDLite ``images`` -> ``boxes``, ``scores``),
static shapes with the requested batch, and node / tensor names in the style of
``torch.onnx.export`` (module-scoped node names such as ``/layer1/layer1.0/conv1/Conv``,
outputs ``<node name>_output_0``, parameters ``layer1.0.conv1.weight``).

Two forms of the same graph:

* ``weights=False`` (the default, used for analysis): every initializer carries its
  ``dims`` and ``data_type`` but **no data**. The model importer only needs shapes, and
  VGG-16 builds in milliseconds instead of allocating half a gigabyte.
  :func:`onnx.checker.check_model` rejects this form (a tensor without a value field);
  :func:`onnx.shape_inference.infer_shapes` with ``strict_mode=True`` accepts it.
* ``weights=True``: initializers hold deterministic float32 values (seeded from the
  parameter name) and the model passes ``onnx.checker.check_model(model, full_check=True)``;
  :func:`export` writes this form for a real TensorRT build.

Small constants that shape logic needs (Reshape targets, Resize scales, Clip bounds,
Squeeze axes, Gather indices, Split sizes, GELU and attention scale factors) are always
``Constant`` nodes with data, in both forms.

Example:
    >>> from placetune.model import zoo
    >>> m = zoo.build("resnet18", batch=4)
    >>> m.graph.input[0].type.tensor_type.shape.dim[0].dim_value
    4
"""

from placetune.model.zoo.registry import IR_VERSION, OPSET, build, default_batch, describe, export, names

__all__ = ["names", "describe", "build", "export", "default_batch", "OPSET", "IR_VERSION"]
