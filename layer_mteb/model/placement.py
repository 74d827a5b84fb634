"""Where a loaded model computes, and real copies of the modules a device map offloaded.

A model split by a device map (``--device-map auto``, accelerate) keeps an offloaded module's parameters on the
``meta`` device and loads them from the offload (CPU memory or disk) only inside that module's own forward. A
module used outside its forward (the final norm applied to every layer by the readout) needs a real copy: read
from the weights map of the accelerate hook that offloaded it, put on the device where the states already are.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import chain
from operator import attrgetter
from typing import Any

import torch
from torch import nn

#: what accelerate's ``add_hook_to_module`` puts on a module: a copy must not run the original's hook
_HOOK_ATTRIBUTES = ("_hf_hook", "_old_forward", "forward")
#: device-map entries that hold weights without computing on them (accelerate runs them on the map's first GPU)
_OFFLOAD = ("cpu", "disk")


def model_devices(model: nn.Module) -> list[torch.device]:
    """The devices ``model`` computes on, first the one its inputs go to: the accelerators its device map names
    (offloaded parts run on them too), or the CPU when it names none; without a device map, its parameters' device."""
    device_map = getattr(model, "hf_device_map", None)
    if device_map:
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
    """A module as a device map left it, and real copies of it: accelerate hooks every offloaded module that holds
    weights with the weights map they are read from in its forward (``weights_map``, an argument of its
    ``AlignDevicesHook``), and leaves the module's own parameters on ``meta``."""

    def __init__(self, module: nn.Module):
        self.module = module

    @property
    def needs_copy(self) -> bool:
        """Whether running the module itself would go through accelerate (a hook, weights on ``meta``)."""
        hooked = any(hasattr(m, "_hf_hook") for m in self.module.modules())
        return hooked or any(t.device.type == "meta" for _, t in self._tensors())

    def devices(self) -> set[torch.device]:
        return {t.device for _, t in self._tensors()}

    def copy_to(self, device: torch.device) -> nn.Module:
        """A copy of the module on ``device`` with real parameters and buffers and no accelerate hook: what is on
        ``meta`` is read from the weights map of the hook of the module that owns it."""
        values = {name: self._real(name, tensor) for name, tensor in self._tensors()}
        with _hooks_set_aside(self.module):
            clone = copy.deepcopy(self.module)
        for name, value in values.items():
            owner_path, _, leaf = name.rpartition(".")
            owner = attrgetter(owner_path)(clone) if owner_path else clone
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
        weights = _offloaded_weights(attrgetter(owner_path)(self.module) if owner_path else self.module)
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
    """Take accelerate's hook attributes off ``module`` and its children for a moment (a deep copy must not copy a
    hook, whose weights map may hold every offloaded weight of the model), and put them back."""
    saved = [(m, {key: m.__dict__.pop(key) for key in _HOOK_ATTRIBUTES if key in m.__dict__}) for m in module.modules()]
    try:
        yield
    finally:
        for m, found in saved:
            m.__dict__.update(found)
