"""l3.torch.compress_activations and torch.compile: a compiled graph (AOTAutograd: inductor,
aot_eager) is refused with the reason; dynamo's eager backend runs the operations themselves
and keeps the per-operator rules. Decoded tensors keep their layout."""

import shutil

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
try:
    # Imported before any test starts l3's GPU (Vulkan): importing torch._dynamo (torchvision
    # does) after lavapipe is loaded crashes the process here.
    import torchvision  # noqa: F401
except ImportError:
    torchvision = None

import l3  # noqa: E402,F401
from l3.torch import compress_activations  # noqa: E402


def smooth(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return nn.functional.avg_pool2d(torch.randn(*shape, generator=g), 5, 1, 2)


def conv_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.Conv2d(16, 16, 3, padding=1), nn.GELU(),
                         nn.Conv2d(16, 3, 3, padding=1))


def step(model, params, x, ca=None):
    for p in params:
        p.grad = None
    if ca is None:
        model(x).square().mean().backward()
    else:
        with ca:
            loss = model(x).square().mean()
        loss.backward()
    return torch.cat([p.grad.flatten() for p in params])


def compiler_or_skip(backend):
    if not hasattr(torch, "compile"):
        pytest.skip("needs torch.compile")
    if backend == "inductor" and not (shutil.which("g++") or shutil.which("c++")):
        pytest.skip("inductor needs a C++ compiler")
    torch._dynamo.reset()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_compiled_graph_is_refused_with_the_reason(backend):
    """AOTAutograd saves a compiled graph's tensors all at once, after the graph ran: no
    operation is known for any (kept exact, they would save nothing), so l3 refuses, saying
    why. The block's hooks are gone after the refusal; the compiled model runs outside the
    block, and under the baseline (``None``: counts only)."""
    from torch.nn.modules import module as nn_module

    compiler_or_skip(backend)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    params = list(model.parameters())
    compiled = torch.compile(model, backend=backend)
    x = torch.randn(16, 32)
    exact = step(model, params, x)
    hooks = len(nn_module._global_forward_hooks)
    for bound in (1e-2, "auto"):
        ca = compress_activations(bound, min_bytes=0)
        with pytest.raises(RuntimeError, match="torch.compile'd graph saves .* so l3 cannot tell"):
            step(compiled, params, x, ca)
        assert len(nn_module._global_forward_hooks) == hooks
        ca.close()
    assert torch.allclose(step(compiled, params, x), exact, rtol=1e-4, atol=1e-6)
    ca = compress_activations(None)
    assert torch.allclose(step(compiled, params, x, ca), exact, rtol=1e-4, atol=1e-6)
    assert ca.stats.saved >= 2 and ca.stats.compressed == 0 and ca.stats.live_raw == 0
    ca.close()
    # The same model uncompiled is compressed as ever.
    ca = compress_activations(1e-2, min_bytes=0)
    step(model, params, x, ca)
    assert ca.stats.compressed >= 1
    ca.close()


def test_dynamos_eager_backend_keeps_the_per_operator_rules():
    """``torch.compile(backend="eager")`` runs the traced operations themselves, through l3's
    torch-function mode: the same codings, the same gradient as uncompiled."""
    compiler_or_skip("eager")
    model, x = conv_model(), smooth(4, 3, 40, 40)
    params = list(model.parameters())
    exact = step(model, params, x)
    compiled = torch.compile(model, backend="eager")
    for bound in (1e-2, "auto"):
        eager_ca = compress_activations(bound, min_bytes=0, threads=1)
        eager = step(model, params, x, eager_ca)
        ca = compress_activations(bound, min_bytes=0, threads=1)
        got = step(compiled, params, x, ca)
        err = float((got - exact).norm() / exact.norm())
        assert 0 < err < 0.05, (bound, err)
        assert torch.allclose(got, eager, rtol=1e-5, atol=1e-7), bound
        s, e = ca.stats.as_dict(), eager_ca.stats.as_dict()
        assert s["compressed"] == e["compressed"] >= 4, (s, e)
        # (Dynamo's graph rounds a few values otherwise: a few bytes apart.)
        assert s["raw_bytes"] == e["raw_bytes"], (bound, s, e)
        assert abs(s["stored_bytes"] - e["stored_bytes"]) < 0.01 * e["stored_bytes"], (
            bound, s, e, ca.bounds(), eager_ca.bounds())
        ca.close()
        eager_ca.close()
    # "auto" measures no layer there (dynamo traces the module hooks into its graph): a layer
    # keeps the start bound (the rules of the other operations still apply).
    for _ in range(2):
        ca = compress_activations("auto", min_bytes=0, threads=1)
        step(compiled, params, x, ca)
        assert ca.bounds() == {} and ca.stats.compressed >= 4
        ca.close()


def test_decoded_tensors_keep_their_layout():
    """A channels-last (or transposed) saved tensor comes back with its strides (a compiled
    backward asserts them; eager's keeps its memory format); a strided view row-major."""
    x = smooth(2, 8, 32, 32)
    ca = compress_activations(1e-2, min_bytes=0)
    for t, kept in ((x.contiguous(memory_format=torch.channels_last), True),
                    (x.transpose(2, 3), True), (x[:, :, ::2], False)):
        y = ca._unpack(ca._pack(t))
        assert y.shape == t.shape and ca.stats.compressed >= 1
        assert float((y - t).abs().max()) <= 1e-2 * float(t.max() - t.min())
        if kept:
            assert y.stride() == t.stride() and not y.is_contiguous(), (y.stride(), t.stride())
        else:
            assert y.is_contiguous()
    ca.close()
