"""A DLA loadable named by its ends (``{ForeignNode[A...B]}``) is read as the network layers between
them in network order. A layer the placement asked on the GPU that lies between (a parallel branch
of a detector's head, a residual shortcut) is not in it: TensorRT puts into a DLA loadable only
layers whose device type is the DLA (``IBuilderConfig.set_device_type``; the worker and trtexec's
``--layerDeviceTypes`` set the GPU on it), so reading it as DLA would record a wrong placement with
nothing to say so when no ``[GpuLayer]`` line names it (a Myelin or fused GPU layer)."""

from placetune.backends.tensorrt.buildlog import locate, parse_build_log

NAMES = ["a", "b", "side", "c", "d"]  # 'side' is a branch between b and c in network order
LOG = parse_build_log(["Number of DLA node candidates offloaded : 1 out of 1",
                       "{ForeignNode[a...d]} successfully offloaded to DLA.",
                       "[GpuLayer] MYELIN: {ForeignNode[/head/x...tail]}"])


def test_a_layer_asked_on_the_gpu_inside_a_range_is_not_read_as_dla():
    loc = locate(LOG, NAMES, None, ["side"])
    assert loc.devices.get("side") != "DLA"
    assert [loc.devices[n] for n in ("a", "b", "c", "d")] == ["DLA"] * 4
    assert loc.subgraphs == [["a", "b", "c", "d"]]


def test_without_the_request_the_range_reads_every_layer_between_its_ends():
    loc = locate(LOG, NAMES)
    assert loc.devices["side"] == "DLA"  # the reading before: a GPU layer recorded on the DLA


def test_a_layer_named_in_a_fused_dla_list_is_read_as_named():
    log = parse_build_log(["{ForeignNode[a + side]} successfully offloaded to DLA."])
    assert locate(log, NAMES, None, ["side"]).devices["side"] == "DLA"  # named, not inferred: decide() judges it
