"""The engine inspector's JSON text in TensorRT's own layout, for the doubles.

``IEngineInspector.getEngineInformation(LayerInformationFormat::kJSON)`` (the Python API's
``get_engine_information``) and trtexec ``--exportLayerInfo`` (which writes that text) lay it out
as the real exports of ``tests/data/trt_corpus`` show:

* names only (``samples-hackathon-18-layerinfo-names``, ``trt-4020-layerinfo-names``)::

      {"Layers": ["a"
      ,"b"
      ],
      "Bindings": ["x"
      ,"y"
      ]}

* DETAILED (``trex-a100-resnet18-fp16-layerinfo``, 8.4; ``evpe-rtx3060-trtexec-10.4-alexnet-layerinfo``,
  10.4): one object per layer, two-space keys, ``},{`` between layers; ``Name``, ``LayerType``,
  ``Inputs``, ``Outputs`` (each tensor with ``Name``, ``Location``, ``Dimensions``,
  ``Format/Datatype``), then the layer's parameters; ``StreamId`` and ``Metadata`` from 8.6 (TREx:
  "TensorRT 8.6 introduced the Metadata field"); ``Metadata`` names the ONNX nodes,
  ``[ONNX Layer: A]`` records joined by ``\\u001e``.

What no real export shows (no published DLA engine's layer information was found): the
``LayerType``, parameters and ``Metadata`` of a DLA loadable and of its ``to nvm``/``from nvm``/
``copy finish`` copies. The doubles write ``LayerType`` ``"ForeignNode"`` for a loadable (a
placeholder naming no device, so that what placetune reads rests on the names, whose order is
that of the real profile of NVIDIA/TensorRT#3143), ``"Reformat"`` for the copies and an empty
``Metadata`` for both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

#: LayerType the doubles give a DLA loadable: a placeholder (see the module's docstring)
DLA_LOADABLE_TYPE = "ForeignNode"


def _str(value: str, escape: bool) -> str:
    return json.dumps(value) if escape else f'"{value}"'


def _tensor(t: Mapping[str, Any], escape: bool) -> str:
    keys = [f'    "Name": {_str(str(t["Name"]), escape)}']
    for key, value in t.items():  # Location (not on a Myelin kernel's tensors), Dimensions, Format/Datatype
        if key != "Name":
            keys.append(f'    "{key}": ' + ("[" + ",".join(str(int(d)) for d in value) + "]" if key == "Dimensions"
                                              else json.dumps(value)))
    return "  {\n" + ",\n".join(keys) + "\n  }"


def _tensors(ts: Sequence[Mapping[str, Any]], escape: bool) -> str:
    return "[" + (",\n".join(_tensor(t, escape) for t in ts).join(["\n", "]"]) if ts else "]")


def _layer(layer: Mapping[str, Any], escape: bool) -> str:
    lines = [f'  "Name": {_str(str(layer["Name"]), escape)}', f'  "LayerType": {json.dumps(str(layer["LayerType"]))}',
             f'  "Inputs": {_tensors(layer.get("Inputs", []), escape)}',
             f'  "Outputs": {_tensors(layer.get("Outputs", []), escape)}']
    for key, value in layer.items():
        if key not in ("Name", "LayerType", "Inputs", "Outputs"):
            lines.append(f'  "{key}": {json.dumps(value, separators=(",", ":")) if isinstance(value, list) else json.dumps(value)}')
    return "{\n" + ",\n".join(lines) + "\n}"


def render(layers: Sequence[Mapping[str, Any] | str], bindings: Sequence[str], escape: bool = True) -> str:
    """The inspector's text: names only when ``layers`` are names, DETAILED when they are dicts
    (``Name``, ``LayerType``, ``Inputs``/``Outputs`` first, then the other keys in order).
    ``escape=False`` writes names as they are (the trtexec double's assumption for its files)."""
    binds = "\n,".join(_str(str(b), escape) for b in bindings)
    tail = '],\n"Bindings": [' + binds + "\n]}"
    if layers and not isinstance(layers[0], str):
        return '{"Layers": [' + ",".join(_layer(x, escape) for x in layers) + tail  # type: ignore[arg-type]
    return '{"Layers": [' + "\n,".join(_str(str(n), escape) for n in layers) + "\n" + tail
