"""The forward pass however the model is placed, and without needless waits for the device.

No GPU is needed: the conditions of one are emulated. accelerate really dispatches a tiny Llama with parts offloaded
to disk (their weights on ``meta``, as ``--device-map auto`` leaves what does not fit on the GPUs); "another GPU"
for the final norm is an accelerate hook that runs it on the ``meta`` device; ``torch.cuda.synchronize`` is replaced
by a recorder; and the host round trips a GPU would wait for (copies between host and device, reading a value back,
a boolean-mask gather) are counted by a torch function mode, outside the model's own forward. A CPU test cannot time
a GPU: these show what is called and where each state goes, not how long it takes.
"""

from __future__ import annotations

import pytest
import torch
from accelerate import dispatch_model
from accelerate.hooks import ModelHook, add_hook_to_module
from accelerate.utils import send_to_device
from conftest import RAGGED_TEXTS, tiny_model, tiny_model_of_depth
from torch.overrides import TorchFunctionMode

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.pooling import pool
from layer_mteb.common.timing import PhaseTimes
from layer_mteb.metrics.metric_settings import MetricSettings
from layer_mteb.metrics.runner import TokenMetrics, discard_vectors
from layer_mteb.model.forward import encode_all_layers
from layer_mteb.model.placement import OffloadedModule
from layer_mteb.vectors.layer_files import SegmentWriter

#: accelerate device maps of the tiny Llama: the final norm offloaded to disk alone, and with a block and the
#: embeddings (all of them run on the CPU, the main device here, loading their weights from disk in their forward)
OFFLOADED = {
    "norm": {"embed_tokens": "cpu", "layers": "cpu", "norm": "disk", "rotary_emb": "cpu"},
    "norm, embeddings, block 2": {
        "embed_tokens": "disk",
        "layers.0": "cpu",
        "layers.1": "disk",
        "norm": "disk",
        "rotary_emb": "cpu",
    },
}


def dispatched_llama(tokenizer, device_map: dict[str, str], folder, dtype: torch.dtype = torch.float32):
    loaded = tiny_model("llama", tokenizer)
    loaded.model.to(dtype)
    dispatch_model(loaded.model, device_map, main_device="cpu", offload_dir=str(folder))
    return loaded


@pytest.mark.parametrize("placement", list(OFFLOADED))
@pytest.mark.parametrize(
    ("pooling", "dtype", "depth"),
    [("mean", "float32", None), ("last", "bfloat16", None), ("first", "float32", None), ("mean", "float32", 1)],
)
def test_an_offloaded_final_norm_reads_out_as_the_model_on_one_device(
    bert_tokenizer, tmp_path, placement, pooling, dtype, depth
):
    config = EncodeConfig(max_length=64, pooling=pooling, dtype=dtype, batch_size=2)
    whole = tiny_model("llama", bert_tokenizer)
    whole.model.to(config.torch_dtype)
    expected, _ = encode_all_layers(whole, RAGGED_TEXTS, config, depth=depth)
    loaded = dispatched_llama(bert_tokenizer, OFFLOADED[placement], tmp_path, config.torch_dtype)
    assert loaded.model.norm.weight.device.type == "meta"  # what accelerate leaves; the norm cannot run outside
    vectors, _ = encode_all_layers(loaded, RAGGED_TEXTS, config, depth=depth)
    assert torch.equal(vectors, expected)
    assert loaded.model.norm.weight.device.type == "meta" and hasattr(loaded.model.norm, "_hf_hook")  # left as it was


def test_a_copy_of_an_offloaded_module_is_real_and_leaves_the_module_offloaded(bert_tokenizer, tmp_path):
    """Block 2 on disk: its input norm's weights are read from the weights map accelerate's hook reads them from."""
    whole = tiny_model("llama", bert_tokenizer)
    loaded = dispatched_llama(bert_tokenizer, OFFLOADED["norm, embeddings, block 2"], tmp_path)
    offloaded = OffloadedModule(loaded.model.layers[1].input_layernorm)
    assert offloaded.needs_copy and offloaded.module.weight.device.type == "meta"
    copy = offloaded.copy_to(torch.device("cpu"))
    assert torch.equal(copy.weight, whole.model.layers[1].input_layernorm.weight)
    assert not hasattr(copy, "_hf_hook") and not OffloadedModule(copy).needs_copy
    assert offloaded.module.weight.device.type == "meta" and hasattr(offloaded.module, "_hf_hook")


def to_target(args, kwargs) -> tuple[torch.device | None, torch.dtype | None]:
    """The device and dtype of a ``Tensor.to`` call (None where it keeps the tensor's)."""
    kwargs = {key: value for key, value in kwargs.items() if key != "copy"}
    device, dtype, *_ = torch._C._nn._parse_to(*args[1:], **kwargs)
    return device, dtype


class Moves(TorchFunctionMode):
    """Records every tensor copied to another device (``Tensor.to`` with a device other than its own)."""

    def __init__(self):
        super().__init__()
        self.shapes: list[tuple[tuple[int, ...], str]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") == "to" and isinstance(args[0], torch.Tensor):
            target = to_target(args, kwargs)[0]
            if target is not None and target != args[0].device:
                self.shapes.append((tuple(args[0].shape), str(target)))
        return func(*args, **kwargs)


class RunsElsewhere(ModelHook):
    """What accelerate's hook does for a module a device map put on another GPU: its inputs go to that device
    (``meta`` stands in for it) and its outputs come back."""

    def pre_forward(self, module, *args, **kwargs):
        return send_to_device(args, "meta"), kwargs

    def post_forward(self, module, output):
        return send_to_device(output, "cpu")


def test_states_are_normed_where_they_are_not_on_the_norms_device(bert_tokenizer):
    """A device map that put the final norm on another GPU than the states (accelerate's hook runs it there; here
    the other device is ``meta``, the only second device a CPU has): each state is normed where it is, by a copy of
    the norm made once, never sent to the norm's device and back (an [B, T, D] copy each way per layer). The pass
    stops after block 1 of 2, so the readout is the only caller of the norm (the model's own forward would run it
    through the hook and fail on ``meta``)."""
    config = EncodeConfig(max_length=64, batch_size=2)
    expected, _ = encode_all_layers(tiny_model("llama", bert_tokenizer), RAGGED_TEXTS, config, depth=1)
    loaded = tiny_model("llama", bert_tokenizer)
    add_hook_to_module(loaded.model.norm, RunsElsewhere())
    with Moves() as moves:
        vectors, _ = encode_all_layers(loaded, RAGGED_TEXTS, config, depth=1)
    assert [m for m in moves.shapes if len(m[0]) == 3] == []  # no token state moved
    assert torch.equal(vectors, expected)


class HostRoundTrips(TorchFunctionMode):
    """Counts, outside the model's own forward, the calls that make a GPU host wait for its device or copy between
    the two: copies to or from the host, values read back, boolean-mask gathers (their size is read back)."""

    WAITS = frozenset({"cpu", "item", "tolist", "numpy", "__bool__", "tensor", "as_tensor", "nonzero"})

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.count = 0
        self.inside = False
        model.register_forward_pre_hook(lambda *_: setattr(self, "inside", True))
        model.register_forward_hook(lambda *_: setattr(self, "inside", False))

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.inside:
            self.count += self._waits(getattr(func, "__name__", ""), args, kwargs)
        return func(*args, **kwargs)

    def _waits(self, name: str, args, kwargs) -> bool:
        if name in self.WAITS:
            return True
        if name == "to":
            return to_target(args, kwargs)[0] is not None
        if name == "__getitem__":
            index = args[1] if isinstance(args[1], tuple) else (args[1],)
            return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in index)
        return False


def round_trips(loaded, sink: str, folder) -> int:
    config = EncodeConfig(max_length=64, batch_size=2)
    n_states = loaded.n_layers + 1
    counter = HostRoundTrips(loaded.model)
    with counter:
        if sink == "in memory":
            encode_all_layers(loaded, RAGGED_TEXTS, config)
        elif sink == "disk":
            with SegmentWriter(folder, RAGGED_TEXTS, n_states, loaded.hidden_size) as writer:
                encode_all_layers(loaded, RAGGED_TEXTS, config, into=writer.write_all)
                writer.finish()
        else:
            metrics = TokenMetrics(n_states, len(RAGGED_TEXTS), MetricSettings(views=0))
            encode_all_layers(loaded, RAGGED_TEXTS, config, on_batch=metrics, into=discard_vectors)
    return counter.count


@pytest.mark.parametrize("sink", ["in memory", "disk", "token metrics"])
def test_host_round_trips_per_batch_do_not_grow_with_depth(bert_tokenizer, tmp_path, sink):
    """The row index, the copy of the pooled vectors to the host and the token metrics' checks and copies happen
    once per batch, not once per layer: a model of 6 blocks makes as many as one of 2 (same texts, same batches)."""
    shallow = round_trips(tiny_model_of_depth("llama", bert_tokenizer, 2), sink, tmp_path / "shallow")
    deep = round_trips(tiny_model_of_depth("llama", bert_tokenizer, 6), sink, tmp_path / "deep")
    assert deep == shallow


def test_an_encoding_pass_waits_for_the_device_once(bert_tokenizer, monkeypatch):
    """Phases do not synchronise the device at every boundary of every batch; the pass waits once, at its end."""
    calls: list[object] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    times = PhaseTimes("cuda:1")
    encode_all_layers(tiny_model("llama", bert_tokenizer), RAGGED_TEXTS, EncodeConfig(batch_size=2), times=times)
    assert calls == ["cuda:1"]
    assert {"tokenize", "forward", "pooling"} <= set(times.seconds)


class Float32(TorchFunctionMode):
    """Records the shapes of the tensors converted to float32."""

    def __init__(self):
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name == "float" or (name == "to" and to_target(args, kwargs)[1] == torch.float32):
            self.shapes.append(tuple(args[0].shape))
        return func(*args, **kwargs)


@pytest.mark.parametrize("pooling", ["first", "last"])
def test_first_and_last_pooling_convert_only_the_pooled_tokens(pooling):
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(3, 5, 4, generator=generator).to(torch.bfloat16)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    with Float32() as converted:
        pooled = pool(hidden, mask, pooling)
    assert converted.shapes == [(3, 4)]  # the [B, D] kept, not the [B, T, D] states
    rows = [0, 0, 0] if pooling == "first" else [2, 4, 0]
    assert torch.equal(pooled, hidden.float()[torch.arange(3), rows])


def test_gpu_batches_are_bigger_under_a_token_budget_cpu_ones_unchanged(monkeypatch):
    """Defaults by device: 32 texts and no cap on a CPU (the scores' batches as before); on a GPU up to 1024 texts,
    capped at the tokens whose hidden states of every layer take 4 GiB, at most 65,536; given sizes always win."""
    assert EncodeConfig().batch_limits(13, 768) == (32, None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU host
    gpu = EncodeConfig(device="cuda")
    assert gpu.batch_limits(13, 768) == (1024, 65536)  # a 100M model: 4 GiB would hold 107,546 tokens
    assert EncodeConfig(device="cuda:1", dtype="bfloat16").batch_limits(33, 4096) == (
        1024,
        4 * 2**30 // (33 * 4096 * 2),
    )
    given = EncodeConfig(device="cuda", batch_size=8, max_batch_tokens=100)
    assert given.batch_limits(33, 4096) == (8, 100)
    assert EncodeConfig(batch_size=8).batch_limits(33, 4096) == (8, None)
