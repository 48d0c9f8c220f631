"""The per-operator rules of `compress_activations`: which operation saves each tensor, and
what that asks of its coding.

A torch-function mode (`OpNames`) names the outermost torch function running when autograd
saves a tensor (``conv2d``, ``batch_norm``,
``relu``, ``max_pool2d``, ``layer_norm``, ``gelu``, ``multi_head_attention_forward``, ...:
what modules call, and what users write); a tensor saved by several functions (ReLU's output,
then the next convolution's input) gets the needs of all of them: a tensor is submitted to the
encoder when the next different tensor is saved, and coded again (from the tensor, still
alive) if a later saver asks for more. In every mode:

* ReLU and leaky ReLU read only the sign of what they save: signs are kept exact (one bit a
  value for the positives, one more where there are negatives), zeros decode to zero and a
  positive value to a positive one (still within the bound: `restore_signs`). Before this,
  small positive activations decoded to <= 0 (3.5 % of them at 1e-2) and flipped ReLU's mask.
* Integer tensors (max-pooling's indices) and bool tensors (dropout's mask) are kept exact, in
  fewer bytes (`pack_exact`); float tensors kept exact keep their zeros as one bit each where
  that pays (`pack_sparse`).
* Tensors saved outside every torch function are kept exact: a custom ``autograd.Function``'s,
  and the inputs ``torch.utils.checkpoint`` (reentrant or not) recomputes a segment from
  (measured: a lossy segment input moves ReLU masks and batch statistics across the whole
  recomputed segment, 28 % gradient error on ResNet-18 at 1e-3).
  What a ``torch.compile``'d graph saves (AOTAutograd's one function, after the graph ran) is
  refused instead (`saved_by_compiled_graph`): kept exact, it would all be.
* Parameters, and views of them (``linear`` saves its weight transposed), are not activations.

``"auto"`` chooses the bound of each saved tensor by its savers' rules (the tightest wins):

* convolution and linear inputs, COMET's rule per layer: a layer's weight gradient is
  ``dW = sum_n delta_n a_n`` over the ``N`` positions (batch x spatial) that share a weight; an
  error ``e`` on the saved activation ``a``, spread over ``[-eb, eb]`` with variance at most
  ``eb^2 / 3``, changes ``dW`` by noise of standard deviation ``eb sqrt(N mean(delta^2) / 3)``.
  The layer's bound is the ``eb`` that makes that noise ``tau`` times the RMS of its own
  weight gradient, ``eb = tau * rms(dW) / sqrt(N * mean(delta^2) / 3)``, with ``delta`` and
  ``dW`` measured in every backward pass (hooks on the output and the weight; the bound
  follows their running mean, halfway each step), and the relative bound ``start`` until the
  layer's first measurement. Layers are the modules with a ``weight`` of two or more axes.
* normalisation inputs (BatchNorm, LayerNorm, GroupNorm, InstanceNorm, RMSNorm): backward
  recomputes ``(x - mean) / std`` from the saved input and BatchNorm's backward amplifies its
  error, so the input is coded as those normalised values, each within ``NORM_TAU`` of its own
  group's std (`encode_normalised`: 0.03 for BatchNorm and kin, 0.1 for LayerNorm and RMSNorm;
  ``norm_tau=`` sets one for all);
* smooth activations' inputs (GELU, SiLU, tanh, sigmoid, ...): ``SMOOTH_TAU`` (0.06) times the
  tensor's std; attention's and softmax's saved tensors: ``ATTENTION_REL`` (3e-3) of the range;
* tensors whose savers read no value (ReLU's output read only by ReLU and max-pooling):
  ``UNREAD`` (1/8) of the range, beside the exact signs;
* anything else: ``start`` of the range.

The constants were measured (``bench/activation_accuracy.py``: torchvision ResNet-18, ResNet-50
and a 4-block ViT, BENCHMARKS.md "Activation accuracy"): with them "auto" keeps the relative
gradient error (all parameters) within about 2-4 % at 5.8-8.3x fewer saved bytes there; the
BatchNorm constant decides most of ResNet's error (0.06 doubles it).

Each saving site asks for a `Need`: value bounds (the coding keeps the tightest one asked),
and whether the signs must come back exact.
"""

from __future__ import annotations

import math
import sys
import threading
from typing import Any, Callable, List, Optional, Tuple

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


#: "auto"'s bound on a normalisation's input, in units of the smallest standard deviation over
#: its groups (measured: see the module documentation).
NORM_TAU = {"batch_norm": 3e-2, "group_norm": 3e-2, "instance_norm": 3e-2, "layer_norm": 0.1,
            "rms_norm": 0.1}
#: "auto"'s bound (relative to the range) on a tensor whose every saving operation reads no
#: value of it (ReLU reads signs, max-pooling its indices).
UNREAD = 0.125
#: "auto"'s bound on the input of a smooth activation (GELU, SiLU, tanh, ...), in units of the
#: tensor's standard deviation.
SMOOTH_TAU = 6e-2
#: "auto"'s bound (relative) on what attention and softmax save.
ATTENTION_REL = 3e-3


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


def _is_leaf_parameter(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.is_leaf and t.requires_grad


def is_parameter(t: torch.Tensor) -> bool:
    """A parameter, a view of one (``linear`` saves its weight transposed) or a cast of one
    (``torch.autocast``'s float16/bfloat16 copies of the weights, which it caches): not an
    activation, held by the model (or autocast) anyway."""
    if _is_leaf_parameter(t) or _is_leaf_parameter(t._base):
        return True
    fn = t.grad_fn
    if fn is None or type(fn).__name__ != "ToCopyBackward0":
        return False
    source = fn.next_functions[0][0] if fn.next_functions else None
    return _is_leaf_parameter(getattr(source, "variable", None))


def need_for(t: torch.Tensor, current: Optional[tuple], bound: Any, absolute: bool,
             start: float, norm_tau: Optional[float],
             site_bound: Callable[[], Optional[float]]) -> Need:
    """What the site saving ``t`` asks of its coding (the rules above): ``current`` is the
    running function (`OpNames.current`; None outside a block), ``site_bound()`` the measured
    bound of the layer running (None before its first measurement)."""
    name, args, kwargs = current if current is not None else ("", (), {})
    if not t.is_floating_point():
        return Need([], False, name)  # integers and bools: exact, packed
    if name == "" and current is not None:
        # Saved outside every torch function: a custom autograd Function, or the inputs
        # torch.utils.checkpoint recomputes its segment from (any error there moves every
        # ReLU mask and statistic of the segment): kept exact, whatever the bound.
        return Need([("exact", 0.0)], False, "(no torch function)")
    signs = name in SIGN_OPS
    if bound != "auto":
        kind = "absolute" if absolute else "relative"
        return Need([(kind, float(bound))], signs, name)  # type: ignore[arg-type]
    if name in SIGN_OPS or name in POOL_OPS:
        # Backward reads only the signs (kept exact) or the pooling indices, no value: a
        # coarse bound; an operation that saves the same tensor for its values adds its own.
        return Need([("unread", UNREAD)], signs, name)
    if name in NORM_OPS:
        groups = norm_groups(name, args, kwargs, t)
        if groups is not None:
            k = NORM_TAU[name] if norm_tau is None else norm_tau
            return Need([("norm", k, groups)], False, name)
    if name in SMOOTH_OPS:
        return Need([("norm", SMOOTH_TAU, ("all", 0.0))], False, name)
    if name in ATTENTION_OPS:
        return Need([("relative", ATTENTION_REL)], False, name)
    if name in LAYER_OPS:
        site = site_bound()
        spec = ("absolute", site) if site is not None else ("relative", start)
        return Need([spec], False, name)
    # Everything else (elementwise arithmetic, pooling by average, ...).
    return Need([("relative", start)], False, name)


#: Modules of torch's AOTAutograd (what ``torch.compile``'s default backend, inductor, and
#: ``aot_eager`` run a compiled graph through).
_AOT_MODULES = ("torch._functorch._aot_autograd", "torch._functorch.aot_autograd")


def saved_by_compiled_graph() -> bool:
    """Whether the tensor being packed now is saved by a ``torch.compile``'d graph: its
    tensors are saved by AOTAutograd's one autograd function, after the whole graph ran (the
    pack hook is called from AOTAutograd's runtime wrapper)."""
    f = sys._getframe(2)  # (the frame that called the autograd function's apply)
    for _ in range(4):
        if f is None:
            return False
        if str(f.f_globals.get("__name__", "")).startswith(_AOT_MODULES):
            return True
        f = f.f_back
    return False


COMPILED_REFUSED = (
    "compress_activations cannot code the tensors a torch.compile'd graph saves for backward: "
    "the compiled graph (AOTAutograd: inductor, aot_eager) saves them all at once after it "
    "ran, so l3 cannot tell which operation saved each one, and its rules need that (ReLU's "
    "signs exact, normalisation inputs within their std, checkpoint inputs exact); kept exact "
    "they would save nothing. Run the compiled part outside the block, or uncompiled (or "
    "compiled with backend='eager') inside it.")
