"""``"auto"``'s measurements of the layers for `compress_activations`: which module is running
when a tensor is saved (so that it is coded at its layer's bound), the layers seen, and per
layer the bound measured from its last backward (``tau`` times the weight gradient's RMS over
the error the output gradient spreads into it), kept across contexts, so that a context per
step keeps adapting."""

from __future__ import annotations

import math
import threading
import weakref
from typing import Any, Dict, List, Optional

import torch

# "auto"'s measurements, per layer and across contexts (a context per step keeps adapting):
# the bound, and the last backward's mean(delta^2), N and tau, until the weight's gradient.
_LAYER_BOUND: "weakref.WeakKeyDictionary[torch.nn.Module, float]" = weakref.WeakKeyDictionary()
_DELTA: "weakref.WeakKeyDictionary[torch.nn.Module, tuple]" = weakref.WeakKeyDictionary()
_WATCHED: "weakref.WeakSet[torch.nn.Module]" = weakref.WeakSet()
_WATCH_LOCK = threading.Lock()


def watch_weight(m: torch.nn.Module) -> None:
    """Hooks layer ``m``'s weight once per process: each gradient it gets, with the delta of
    the same backward, updates the layer's bound (halfway, geometrically). The hook holds the
    layer weakly."""
    with _WATCH_LOCK:
        if m in _WATCHED:
            return
        _WATCHED.add(m)
    module = weakref.ref(m)

    def hook(g: torch.Tensor) -> None:
        mod = module()
        measured = _DELTA.pop(mod, None) if mod is not None else None
        if measured is None:
            return
        mean_d2, n, tau = measured
        rms_w = float(g.detach().float().square().mean().sqrt())
        if mean_d2 <= 0 or n <= 0 or rms_w <= 0 or not math.isfinite(rms_w):
            return
        eb = tau * rms_w / math.sqrt(n * mean_d2 / 3.0)
        old = _LAYER_BOUND.get(mod)
        _LAYER_BOUND[mod] = eb if old is None else math.sqrt(old * eb)

    m.weight.register_hook(hook)


def is_layer(m: torch.nn.Module) -> bool:
    """Whether ``m`` is a layer "auto" measures: a weight of two or more axes that trains."""
    w = getattr(m, "weight", None)
    return isinstance(w, torch.nn.Parameter) and w.requires_grad and w.dim() >= 2


class LayerWatch:
    """One context's view of the layers: the module running now (``stack``), the last layer
    that ran, the layers seen (``names`` by id, ``layers`` as ``(name, module)`` in order) and
    the forward hooks (on ``model``'s modules, or global) while the block runs."""

    def __init__(self, model: Optional[torch.nn.Module], tau: float) -> None:
        self.model, self.tau = model, tau
        self.handles: List[Any] = []
        self.stack: List[torch.nn.Module] = []
        self.last_layer: Optional[weakref.ReferenceType] = None
        self.names: Dict[int, str] = {}
        self.layers: List[tuple] = []

    def bounds(self) -> Dict[str, float]:
        """Each measured layer's absolute bound, by name."""
        out = {}
        for name, ref in self.layers:
            m = ref()
            if m is not None and m in _LAYER_BOUND:
                out[name] = _LAYER_BOUND[m]
        return out

    def remove(self) -> None:
        """Removes the forward hooks (the block ended)."""
        for h in self.handles:
            h.remove()
        self.handles = []
        self.stack.clear()

    def hook(self) -> None:
        if self.model is None:
            # Every module that runs inside the block (global module hooks); layers are
            # found as they run.
            from torch.nn.modules import module as nn_module

            self.handles = [nn_module.register_module_forward_pre_hook(self.enter_any),
                             nn_module.register_module_forward_hook(self.leave_any)]
            return
        for name, m in self.model.named_modules():
            layer = is_layer(m)
            self.handles.append(m.register_forward_pre_hook(self.enter_module))
            self.handles.append(m.register_forward_hook(self.leave_module(layer)))
            if layer:
                self.know(m, name or type(m).__name__)

    def know(self, m: torch.nn.Module, name: str) -> None:
        if id(m) not in self.names:
            self.names[id(m)] = name
            self.layers.append((name, weakref.ref(m)))
            watch_weight(m)

    def enter_any(self, m: torch.nn.Module, inputs: Any) -> None:
        """The global forward pre-hook: a layer seen for the first time is named (its class
        and the order it was first seen in) and watched before its forward saves anything, so
        its input is coded at its own bound, as with ``model``. (Named in the forward hook,
        after its forward, a layer's first forward in a block coded its input at the bound of
        the layer before, the first layer's at ``start``: with a block per step, every
        forward.)"""
        if is_layer(m):
            self.know(m, f"{type(m).__name__}#{len(self.names)}")
        self.enter_module(m, inputs)

    def leave_any(self, m: torch.nn.Module, inputs: Any, output: Any) -> None:
        """The global forward hook."""
        self.leave_module(is_layer(m))(m, inputs, output)

    def enter_module(self, m: torch.nn.Module, _inputs: Any) -> None:
        self.stack.append(m)

    def leave_module(self, layer: bool) -> Any:
        def hook(m: torch.nn.Module, _inputs: Any, output: Any) -> None:
            if self.stack and self.stack[-1] is m:
                self.stack.pop()
            if not layer:
                return
            self.last_layer = weakref.ref(m)
            if isinstance(output, torch.Tensor) and output.requires_grad:
                # Output features: the last axis of a linear layer's output, else axis 1.
                dim = -1 if isinstance(m, torch.nn.Linear) or output.dim() < 2 else 1
                out_ch = output.shape[dim]
                module, tau = weakref.ref(m), self.tau

                def on_grad(g: torch.Tensor) -> None:
                    # N: the terms summed into each weight (batch x positions).
                    n = g.numel() / max(1, out_ch)
                    mod = module()
                    if mod is not None:
                        _DELTA[mod] = (float(g.detach().float().square().mean()), n, tau)
                output.register_hook(on_grad)
        return hook

    def site_bound(self) -> Optional[float]:
        """The absolute bound of a tensor saved now ("auto"), or None for the start bound."""
        for m in reversed(self.stack):
            if id(m) in self.names:
                return _LAYER_BOUND.get(m)
        last = self.last_layer() if self.last_layer is not None else None
        if last is not None:
            return _LAYER_BOUND.get(last)
        return None
