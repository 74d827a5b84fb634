"""Where a loaded model computes, and real copies of the modules a device map offloaded: an offloaded module's
parameters stay on ``meta`` outside its own forward, so one used elsewhere (the final norm the readout applies to
every layer) needs a copy, read from its accelerate hook's weights map.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import chain
from typing import Any

import torch
from torch import nn

#: what accelerate's ``add_hook_to_module`` puts on a module: a copy must not run the original's hook
_HOOK_ATTRIBUTES = ("_hf_hook", "_old_forward", "forward")
#: device-map entries that hold weights without computing on them (accelerate runs them on the map's first GPU)
_OFFLOAD = ("cpu", "disk")


def model_devices(model: nn.Module) -> list[torch.device]:
    """The devices ``model`` computes on, inputs' first: its device map's accelerators (else the CPU), or without a
    map its parameters' device."""
    if device_map := getattr(model, "hf_device_map", None):
        devices = dict.fromkeys(_as_device(place) for place in device_map.values() if place not in _OFFLOAD)
        return list(devices) or [torch.device("cpu")]
    return [next(chain(model.parameters(), model.buffers())).device]


def synchronize(devices: Iterable[torch.device]) -> None:
    """Wait for the work queued on each CUDA device of ``devices`` (others run synchronously)."""
    for device in devices:
        if device.type == "cuda":
            torch.cuda.synchronize(device)


def _as_device(place: Any) -> torch.device:
    """A device-map value (an accelerator index, ``"cuda:1"``, ``"mps"``) as a device."""
    return torch.device("cuda", place) if isinstance(place, int) else torch.device(place)


class OffloadedModule:
    """A module as a device map left it (offloaded weights on ``meta``, read from its hook's ``weights_map`` in its
    forward), and real copies of it."""

    def __init__(self, module: nn.Module):
        self.module = module
        self.on_device: dict[torch.device, nn.Module] = {}

    def __call__(self, state: torch.Tensor) -> torch.Tensor:
        """Run the module where ``state`` is (the final norm the readout applies to every layer): under a device map
        (norm on another GPU, or offloaded) a copy is made once per device, never moving states to it and back."""
        module = self.on_device.get(state.device)
        if module is None:
            own = not self.needs_copy and self.devices() <= {state.device}
            module = self.module if own else self.copy_to(state.device)
            self.on_device[state.device] = module
        return module(state)

    @property
    def needs_copy(self) -> bool:
        """Whether running the module itself would go through accelerate (a hook, weights on ``meta``)."""
        hooked = any(hasattr(m, "_hf_hook") for m in self.module.modules())
        return hooked or any(t.device.type == "meta" for _, t in self._tensors())

    def devices(self) -> set[torch.device]:
        """The devices its parameters and buffers are on."""
        return {t.device for _, t in self._tensors()}

    def copy_to(self, device: torch.device) -> nn.Module:
        """A copy on ``device`` with real parameters and buffers (``meta`` ones read from the owner's hook), no hook."""
        values = {name: self._real(name, tensor) for name, tensor in self._tensors()}
        with _hooks_set_aside(self.module):
            clone = copy.deepcopy(self.module)
        for name, value in values.items():
            owner_path, _, leaf = name.rpartition(".")
            owner = clone.get_submodule(owner_path)
            value = value.detach().to(device, copy=True)
            is_parameter = any(own == leaf for own, _ in owner.named_parameters(recurse=False))
            setattr(owner, leaf, nn.Parameter(value, requires_grad=False) if is_parameter else value)
        return clone.eval()

    def _tensors(self) -> Iterator[tuple[str, torch.Tensor]]:
        return chain(self.module.named_parameters(), self.module.named_buffers())

    def _real(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        if tensor.device.type != "meta":
            return tensor
        owner_path, _, leaf = name.rpartition(".")
        weights = _offloaded_weights(self.module.get_submodule(owner_path))
        if weights is None or leaf not in weights:
            raise RuntimeError(f"{name} of {type(self.module).__name__} is on the meta device and no offload holds it")
        return weights[leaf]


def _offloaded_weights(module: nn.Module) -> Any:
    """The weights map of ``module``'s offloading accelerate hook (one of a sequence of hooks too), else None."""
    hook = getattr(module, "_hf_hook", None)
    for one in getattr(hook, "hooks", [hook]):
        if getattr(one, "offload", False) and getattr(one, "weights_map", None) is not None:
            return one.weights_map
    return None


@contextmanager
def _hooks_set_aside(module: nn.Module) -> Iterator[None]:
    """Take accelerate's hook attributes off ``module`` and its children for a moment: a deep copy must not copy a
    hook's weights map (every offloaded weight of the model)."""
    saved = [(m, {key: m.__dict__.pop(key) for key in _HOOK_ATTRIBUTES if key in m.__dict__}) for m in module.modules()]
    try:
        yield
    finally:
        for m, found in saved:
            m.__dict__.update(found)
