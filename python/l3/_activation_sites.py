"""Where each saved activation comes from, and what that asks of its coding (the per-operator
rules of `compress_activations`; see `l3._activations` for the whole).

The operation saving a tensor is named by a `TorchFunctionMode` that is active inside the
block: autograd calls the saved-tensor pack hook while a function runs, and the mode knows the
outermost torch function running (``conv2d``, ``batch_norm``, ``relu``, ...: what modules call
and what users write). Tensors saved outside every torch function (a custom
``autograd.Function``'s ``save_for_backward``, the inputs ``torch.utils.checkpoint`` keeps) are
named ``""``.

Each saving site asks for a `Need`: value bounds (the coding keeps the tightest one asked),
and whether the signs must come back exact (a mask is taken from them in backward).
"""

from __future__ import annotations

import math
import threading
from typing import Any, List, Optional, Tuple

import torch
from torch.overrides import TorchFunctionMode

#: Functions whose backward reads only the sign of the tensor they save (ReLU: ``result > 0``;
#: leaky ReLU: ``self > 0``): its signs are kept exact. (Dropout saves its mask as a bool
#: tensor: exact.)
SIGN_OPS = frozenset({"relu", "relu_", "leaky_relu", "leaky_relu_"})
#: Normalisations: backward recomputes the normalised input from the saved input, so an error
#: there counts in units of each group's standard deviation (and is amplified by it).
NORM_OPS = frozenset({"batch_norm", "layer_norm", "group_norm", "instance_norm", "rms_norm"})
#: Max-pooling: backward scatters the gradient through the (integer) indices; the saved input
#: is used for its shape only.
POOL_OPS = frozenset({
    "max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices",
    "max_pool2d_with_indices", "max_pool3d_with_indices", "adaptive_max_pool1d",
    "adaptive_max_pool2d", "adaptive_max_pool3d", "fractional_max_pool2d",
    "fractional_max_pool3d",
})
#: Attention and softmax: a saved softmax output (or attention's queries, keys, values, output
#: and log-sum-exp) enters backward multiplied by the gradient and by itself.
ATTENTION_OPS = frozenset({"softmax", "log_softmax", "scaled_dot_product_attention",
                           "multi_head_attention_forward"})
#: Smooth pointwise activations: backward evaluates their derivative at the saved input (or
#: output), off by the error times the second derivative.
SMOOTH_OPS = frozenset({"gelu", "silu", "silu_", "tanh", "tanh_", "sigmoid", "sigmoid_",
                        "softplus", "mish", "mish_", "hardswish", "hardswish_", "elu", "elu_",
                        "selu", "selu_", "celu", "celu_", "logsigmoid", "exp", "log"})
#: Layers whose weight gradient is the saved input times the output's gradient (COMET's rule).
LAYER_OPS = frozenset({"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                       "conv_transpose3d", "linear", "bilinear"})


class OpNames(TorchFunctionMode):
    """Knows the outermost torch function running on this thread (and its arguments) while
    the block runs; the pack hook asks `current`."""

    def __init__(self) -> None:
        super().__init__()
        self._local = threading.local()

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None):
        stack = self._stack()
        stack.append((getattr(func, "__name__", ""), args, kwargs))
        try:
            return func(*args, **(kwargs or {}))
        finally:
            stack.pop()

    def _stack(self) -> List[tuple]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def current(self) -> Tuple[str, tuple, dict]:
        stack = self._stack()
        if not stack:
            return "", (), {}
        name, args, kwargs = stack[-1]
        return name, args, kwargs or {}


class Need:
    """What the coding of one saved tensor must keep: ``specs`` (value bounds: ``("relative",
    r)`` of the tensor's range, ``("absolute", e)``, ``("norm", k, groups)``: ``k`` times the
    smallest standard deviation over the normalisation's groups), ``signs`` (each value's sign,
    zero included, exact), and the sites that asked (for the record)."""

    __slots__ = ("specs", "signs", "sites")

    def __init__(self, specs: List[tuple], signs: bool, site: str) -> None:
        self.specs, self.signs, self.sites = list(specs), signs, [site]

    def merge(self, other: "Need") -> bool:
        """Adds ``other``'s asks; whether anything was new."""
        new = [s for s in other.specs if s not in self.specs]
        self.specs += new
        signs = other.signs and not self.signs
        self.signs = self.signs or other.signs
        self.sites += [s for s in other.sites if s not in self.sites]
        return bool(new) or signs


def norm_groups(name: str, args: tuple, kwargs: dict, t: torch.Tensor) -> Optional[tuple]:
    """How ``name`` (a normalisation) groups ``t`` (its input): ``(reduce dims, eps)`` for
    `smallest_std`, or None if ``t`` is not its input."""
    x = args[0] if args else kwargs.get("input")
    if not isinstance(x, torch.Tensor) or tuple(x.shape) != tuple(t.shape) or t.dim() < 1:
        return None

    def arg(i: int, key: str, default: Any) -> Any:
        if key in kwargs:
            return kwargs[key]
        return args[i] if len(args) > i else default

    if name == "batch_norm":
        return ("channels", float(arg(7, "eps", 1e-5)))
    if name == "instance_norm":
        return ("instances", float(arg(7, "eps", 1e-5)))
    if name == "layer_norm":
        shape = arg(1, "normalized_shape", (t.shape[-1],))
        return ("last", len(tuple(shape)) if not isinstance(shape, int) else 1,
                float(arg(4, "eps", 1e-5)))
    if name == "group_norm":
        return ("groups", int(arg(1, "num_groups", 1)), float(arg(4, "eps", 1e-5)))
    if name == "rms_norm":
        shape = arg(1, "normalized_shape", (t.shape[-1],))
        eps = arg(3, "eps", None)
        return ("rms", len(tuple(shape)) if not isinstance(shape, int) else 1,
                float(eps) if eps is not None else float(torch.finfo(t.dtype).eps))
    return None


def group_stats(x: torch.Tensor, groups: tuple) -> Tuple[torch.Tensor, torch.Tensor, tuple]:
    """The normalisation's mean and ``sqrt(var + eps)`` per group of ``x`` (float32,
    finite), shaped to broadcast against ``x.reshape(view)``; ``view`` is returned third (the
    mean is 0 for RMS normalisation)."""
    kind = groups[0]
    if kind == "all":
        view = (x.numel(),)
        dims: Any = 0
    elif kind == "channels":
        view = (x.shape[0], x.shape[1], -1) if x.dim() > 1 else (x.shape[0], 1)
        dims = (0, 2) if x.dim() > 1 else 0
    elif kind == "instances":
        view = (x.shape[0], x.shape[1], -1) if x.dim() > 2 else tuple(x.shape) + (1,)
        dims = -1
    elif kind in ("last", "rms"):
        view = (-1, int(math.prod(x.shape[x.dim() - groups[1]:])))
        dims = -1
    else:  # groups
        view = (x.shape[0], groups[1], -1)
        dims = -1
    v = x.reshape(view)
    if kind == "rms":
        mean = torch.zeros((), dtype=v.dtype)
        var = v.square().mean(dim=dims, keepdim=True)
    else:
        var, mean = torch.var_mean(v, dim=dims, keepdim=True, unbiased=False)
    return mean, (var + groups[-1]).sqrt(), view


def smallest_std(x: torch.Tensor, groups: tuple) -> float:
    """The smallest ``sqrt(var + eps)`` over the normalisation's groups of ``x`` (float32,
    finite): the scale backward divides an input error by."""
    return float(group_stats(x, groups)[1].min())


def is_parameter(t: torch.Tensor) -> bool:
    """A parameter, or a view of one (``linear`` saves its weight transposed): not an
    activation, held by the model anyway."""
    if t.is_leaf and t.requires_grad:
        return True
    base = t._base
    return base is not None and base.is_leaf and base.requires_grad
