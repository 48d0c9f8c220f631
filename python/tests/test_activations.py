"""l3.torch.compress_activations: saved activations compressed within their bound and
restored for backward; exact where it must be; counted exactly; options checked."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
try:
    # Imported before any test starts l3's GPU (Vulkan): importing torch._dynamo (torchvision
    # does) after lavapipe is loaded crashes the process here.
    import torchvision
except ImportError:
    torchvision = None

import l3  # noqa: E402
from l3.torch import compress_activations  # noqa: E402


def smooth(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g)
    return nn.functional.avg_pool2d(x, 5, 1, 2) if x.dim() == 4 else x


def round_trip(ca, t):
    packed = ca._pack(t)
    return ca._unpack(packed), packed


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("rel", [1e-2, 1e-3])
def test_a_saved_tensor_comes_back_within_its_bound(dtype, rel):
    x = (smooth(4, 8, 48, 48) * 3 + 1).to(dtype)
    x[0, 0, 0, :3] = torch.tensor([math.nan, math.inf, -math.inf], dtype=dtype)
    ca = compress_activations(rel, min_bytes=0)
    y, packed = round_trip(ca, x)
    assert y.dtype == dtype and y.shape == x.shape
    if dtype == torch.bfloat16 and rel == 1e-3:
        # Below half a bfloat16 ulp at the largest magnitude: no bound is left, kept exact.
        assert packed.future.result() is None
        assert torch.equal(y.view(torch.int16), x.view(torch.int16))
        return
    assert packed.future.result() is not None, "it was compressed"
    finite = torch.isfinite(x)
    # NaN and infinities exactly; the rest within rel x range, after the cast back.
    assert torch.equal(torch.isnan(y), torch.isnan(x))
    assert torch.equal(y[torch.isinf(x)], x[torch.isinf(x)])
    xf, yf = x[finite].double(), y[finite].double()
    bound = rel * float(xf.max() - xf.min())
    err = float((yf - xf).abs().max())
    assert err <= bound, (err, bound)
    assert err > 0, "lossy at this bound"
    stats = ca.stats.as_dict()
    assert stats["compressed"] == 1 and stats["stored_bytes"] < x.numel() * x.element_size()
    ca.close()


def test_an_absolute_bound_and_tensors_kept_exact():
    ca = compress_activations(0.05, absolute=True, min_bytes=1024)
    x = smooth(2, 4, 32, 32)
    y, _ = round_trip(ca, x)
    assert float((y - x).abs().max()) <= 0.05
    # Small, integer, parameters and listed tensors come back as they were (the same data).
    small = torch.randn(10)
    ints = torch.arange(100000)
    param = nn.Parameter(torch.randn(300, 300))
    for t in (small, ints, param):
        back, _ = round_trip(ca, t)
        assert back is t or torch.equal(back, t)
    listed = smooth(2, 4, 32, 32, seed=3)
    ca2 = compress_activations(0.05, min_bytes=0, exclude=[listed])
    back, packed = round_trip(ca2, listed)
    assert torch.equal(back, listed) and packed.future is None
    # A constant tensor has no range: kept exact.
    const = torch.full((64, 64, 8), 2.5)
    back, packed = round_trip(ca2, const)
    assert torch.equal(back, const)
    ca.close()
    ca2.close()


def train_step(model, x, ca=None, **kw):
    model.zero_grad()
    if ca is None:
        model(x).square().mean().backward()
    else:
        with ca:
            loss = model(x).square().mean()
        loss.backward()
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def model_of():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.GELU(), nn.Conv2d(16, 16, 3, padding=1),
                         nn.ReLU(), nn.Conv2d(16, 3, 3, padding=1))


def test_backward_through_compressed_activations():
    model, x = model_of(), smooth(4, 3, 40, 40)
    exact = train_step(model, x)
    errors = {}
    for rel in (1e-4, 1e-2):
        ca = compress_activations(rel, min_bytes=0)
        got = train_step(model, x, ca)
        errors[rel] = float((got - exact).norm() / exact.norm())
        s = ca.stats.as_dict()
        assert s["compressed"] >= 4 and s["live_raw"] == 0, s
        ca.close()
    # The gradient is close, and closer at the tighter bound.
    assert 0 < errors[1e-4] < errors[1e-2] < 0.05, errors


def test_the_baseline_counts_what_autograd_saves():
    model, x = model_of(), smooth(4, 3, 40, 40)
    ca = compress_activations(None)
    train_step(model, x, ca)
    s = ca.stats.as_dict()
    # Saved (parameters excluded): x, each conv's output (GELU's and ReLU's input, or the
    # ReLU's output), GELU's output (the next conv's input): each counted once.
    assert s["compressed"] == 0 and s["saved"] == s["exact"] >= 4
    assert s["peak_raw"] == s["peak_stored"] >= 4 * 16 * 40 * 40 * 4
    assert s["live_raw"] == 0
    ca.close()


def test_a_tensor_saved_twice_is_kept_once():
    x = smooth(2, 4, 40, 40).requires_grad_()
    ca = compress_activations(1e-2, min_bytes=0)
    with ca:
        y = x.exp()  # saves its output y (x, a leaf that requires grad, is not an activation)
        z = (y * y).sum()  # saves y twice more (both operands)
    z.backward()
    # Three saves of one tensor: kept (and counted) once.
    assert ca.stats.saved == 1 and ca.stats.raw_bytes == y.numel() * 4, ca.stats
    assert torch.allclose(x.grad, 2 * y.detach() * y.detach(), rtol=0.05, atol=0.05)
    ca.close()


def test_auto_measures_each_layer_and_adapts():
    model, x = model_of(), smooth(4, 3, 40, 40)
    ca = compress_activations("auto", model=model, min_bytes=0)
    for _ in range(3):
        train_step(model, x, ca)
    bounds = ca.bounds()
    assert set(bounds) == {"0", "2", "4"}, bounds
    assert all(v > 0 and math.isfinite(v) for v in bounds.values())
    # A tighter tolerance gives tighter bounds.
    ca2 = compress_activations("auto", model=model, min_bytes=0, tau=1e-4)
    for _ in range(3):
        train_step(model, x, ca2)
    assert all(ca2.bounds()[k] < bounds[k] for k in bounds)
    ca.close()
    ca2.close()


def test_auto_without_a_model_finds_the_layers_that_run():
    model, x = model_of(), smooth(4, 3, 40, 40)
    exact = train_step(model, x)
    ca = compress_activations("auto", min_bytes=0)
    for _ in range(2):
        got = train_step(model, x, ca)
    assert sorted(ca.bounds()) == ["Conv2d#0", "Conv2d#1", "Conv2d#2"], ca.bounds()
    assert ca.stats.compressed >= 4
    err = float((got - exact).norm() / exact.norm())
    assert 0 < err < 0.05, err
    # The global hooks are gone after the block: another forward is not seen.
    nn.Linear(4, 4)(torch.randn(2, 4))
    assert len(ca.bounds()) == 3
    ca.close()


def test_a_context_per_step_keeps_adapting_and_leaks_no_hooks():
    from torch.nn.modules import module as nn_module

    model, x = model_of(), smooth(4, 3, 40, 40)
    globals_before = (len(nn_module._global_forward_hooks),
                      len(nn_module._global_forward_pre_hooks))
    seen = []
    for _ in range(4):
        ca = compress_activations("auto", min_bytes=0)
        train_step(model, x, ca)
        seen.append(ca.bounds())
        ca.close()
    # Measured in the first step's backward, used and updated by the next contexts.
    assert all(len(b) == 3 for b in seen), seen
    assert seen[1] != seen[3]
    assert all(len(model[i].weight._backward_hooks) == 1 for i in (0, 2, 4))
    assert len(model[0]._forward_hooks) == 0
    assert (len(nn_module._global_forward_hooks),
            len(nn_module._global_forward_pre_hooks)) == globals_before


def test_options_are_checked():
    with pytest.raises(l3.ParameterError):
        compress_activations(-1.0)
    with pytest.raises(l3.ParameterError):
        compress_activations(float("nan"))
    with pytest.raises(TypeError):
        compress_activations("fast")
    with pytest.raises(l3.ParameterError):
        compress_activations(1e-2, min_bytes=-1)
    with pytest.raises(l3.ParameterError):
        compress_activations("auto", model=nn.Linear(2, 2), tau=0)
    ca = compress_activations(1e-2)
    with ca:
        with pytest.raises(RuntimeError, match="already"):
            ca.__enter__()
    ca.close()


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (an NVIDIA GPU)")


@cuda
def test_cuda_activations_leave_the_device_between_forward_and_backward():
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Conv2d(64, 64, 3, padding=1),
                                                          nn.GELU())]).to(dev)
    x = nn.functional.avg_pool2d(torch.randn(32, 64, 96, 96, device=dev), 5, 1, 2)

    def step(ca):
        model.zero_grad()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        if ca is None:
            loss = model(x).square().mean()
        else:
            with ca:
                loss = model(x).square().mean()
        torch.cuda.synchronize()
        held = torch.cuda.memory_allocated() - base  # what the graph holds after forward
        loss.backward()
        torch.cuda.synchronize()
        return torch.cat([p.grad.flatten() for p in model.parameters()]), held

    exact, held_exact = step(None)
    ca = compress_activations(1e-3, pending_mb=64)
    got, held = step(ca)
    s = ca.stats.as_dict()
    assert s["compressed"] >= 8, s
    # The saved activations (8 tensors of 75 MB) are off the device; the compressed bytes
    # are on the host.
    assert held < held_exact / 4, (held, held_exact)
    err = float((got - exact).norm() / exact.norm())
    assert 0 < err < 1e-2, err
    ca.close()


def test_the_gpu_encoder_gives_the_cpu_encoders_bytes(gpu_available):
    if not gpu_available:
        pytest.skip("no GPU adapter")
    rng = np.random.default_rng(5)
    for shape, axes in [((4, 8, 40, 40), 0b1100), ((3, 1000), 0b10), ((70001,), None),
                        ((2, 3, 17, 9), None)]:
        x = np.cumsum(rng.standard_normal(shape).astype(np.float32), axis=-1)
        x.reshape(-1)[::97] = np.nan
        eb = 1e-2 * float(np.nanmax(x) - np.nanmin(x))
        cpu = l3.encode_field(x, max_error=eb, version=3, predictor="differences", axes=axes)
        gpu = l3._l3.gpu_encode_field(x, max_error=eb, axes=axes)
        assert gpu == cpu, (shape, axes)
        y = l3.decode_field(gpu)
        ok = ~np.isnan(x)
        assert np.array_equal(np.isnan(y), ~ok) and np.abs(y[ok] - x[ok]).max() <= eb


def test_a_staging_buffer_is_encoded_where_it_is(gpu_available):
    if not gpu_available:
        pytest.skip("no GPU adapter")
    try:
        staging = l3._l3.GpuEncodeStaging(4 * 2 * 8 * 40 * 40 + 4096)
    except l3.GpuError as e:
        if "external_memory" in str(e) or "export" in str(e):
            pytest.skip(f"this Vulkan device exports no memory: {e}")
        raise
    x = smooth(2, 8, 40, 40).numpy()
    eb = 1e-3 * float(x.max() - x.min())
    staging.write(x)
    got = staging.encode(list(x.shape), max_error=eb, axes=0b1100)
    assert got == l3.encode_field(x, max_error=eb, version=3, predictor="differences",
                                  axes=0b1100)
    with pytest.raises(l3.ParameterError, match="staging"):
        staging.encode([1 << 20, 8], max_error=eb)
    with pytest.raises(l3.ParameterError):
        l3._l3.GpuEncodeStaging(6)
    assert staging.size >= x.nbytes and len(staging.device_uuid) == 16


@cuda
@pytest.mark.parametrize("codec", ["auto", "fields"])
def test_cuda_activations_are_encoded_on_the_gpu_byte_for_byte(codec):
    """The default keeps a block-coded stream in l3's GPU memory (the host encoder's bytes);
    ``codec="fields"`` gives the host the CPU encoder's error-bounded file."""
    pytest.importorskip("cuda.bindings")
    dev = torch.device("cuda")
    x = nn.functional.avg_pool2d(torch.randn(8, 16, 64, 64, device=dev), 5, 1, 2)
    ca = compress_activations(1e-2, gpu_encode=True, min_bytes=0, codec=codec)
    y, packed = round_trip(ca, x)
    coded = packed.future.result()
    assert coded is not None and ca.stats.gpu_encoded == 1
    host = x.cpu().numpy()
    if codec == "auto":
        assert coded.blocks and coded.pos is None
        eb = coded.data.bound
        assert eb <= packed.coded_eb
        assert coded.data.to_bytes() == l3.encode_blocks(host, max_error=packed.coded_eb)
    else:
        eb = l3.field_info(coded.data)["max_error"]
        assert coded.data == l3.encode_field(host, max_error=eb, version=3,
                                             predictor="differences", axes=0b1100)
    assert y.device == x.device
    assert float((y - x).abs().max()) <= eb
    ca.close()


@cuda
def test_cuda_training_with_the_gpu_encoder():
    pytest.importorskip("cuda.bindings")
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Conv2d(64, 64, 3, padding=1),
                                                          nn.GELU())]).to(dev)
    x = nn.functional.avg_pool2d(torch.randn(32, 64, 96, 96, device=dev), 5, 1, 2)
    model.zero_grad()
    model(x).square().mean().backward()
    exact = torch.cat([p.grad.flatten() for p in model.parameters()])
    ca = compress_activations(1e-3, gpu_encode=True)
    model.zero_grad()
    with ca:
        loss = model(x).square().mean()
    loss.backward()
    got = torch.cat([p.grad.flatten() for p in model.parameters()])
    assert ca.stats.gpu_encoded >= 8, ca.stats
    err = float((got - exact).norm() / exact.norm())
    assert 0 < err < 1e-2, err
    ca.close()


def test_a_staging_buffer_takes_a_gpu_decode(gpu_available):
    if not gpu_available:
        pytest.skip("no GPU adapter")
    x = smooth(2, 8, 40, 40).numpy()
    data = l3.encode_field(x, max_error=1e-3, version=3, predictor="differences", axes=0b1100)
    try:
        staging = l3._l3.GpuEncodeStaging(x.nbytes)
    except l3.GpuError as e:
        pytest.skip(f"this Vulkan device exports no memory: {e}")
    assert staging.decode_into(data) == list(x.shape)
    got = np.frombuffer(staging.read_back(x.nbytes), dtype=np.float32)
    assert np.array_equal(got.view(np.uint32), l3.decode_field(data).reshape(-1).view(np.uint32))
    small = l3._l3.GpuEncodeStaging(1024)
    with pytest.raises(l3.ParameterError):
        small.decode_into(data)


def test_the_one_bound_spelling():
    """``{"absolute": e}`` / ``{"relative": r}`` as elsewhere in l3; a relative bound with
    ``absolute=True`` is refused."""
    x = smooth(2, 4, 32, 32)
    ca = compress_activations({"absolute": 0.05}, min_bytes=0)
    y, _ = round_trip(ca, x)
    assert float((y - x).abs().max()) <= 0.05
    ca.close()
    ca = compress_activations({"relative": 1e-3}, min_bytes=0)
    y, _ = round_trip(ca, x)
    assert float((y - x).abs().max()) <= 1e-3 * float(x.max() - x.min())
    ca.close()
    with pytest.raises(l3.ParameterError):
        compress_activations({"relative": 1e-3}, absolute=True)


# -- standard models: the per-operator rules (see l3/_activations.py) -------------------------


def test_relu_signs_come_back_exact():
    """ReLU's backward reads ``result > 0``: every zero decodes to zero and every positive,
    however small, to a positive, within the bound; the gradient is exact."""
    x = smooth(4, 8, 48, 48).requires_grad_()
    c = torch.randn(x.shape, generator=torch.Generator().manual_seed(1))
    ca = compress_activations(1e-2, min_bytes=0, exclude=[c])  # (mul saves c: kept exact)
    with ca:
        y = torch.relu(x * 1)
        loss = (y * c).sum()
    back = y.grad_fn._saved_result.detach()  # decoded by the hooks
    yd = y.detach()
    assert torch.equal(back == 0, yd == 0) and bool((back[yd > 0] > 0).all())
    assert float((yd < 2e-2 * float(yd.max())).float().mean()) > 0.1  # small positives exist
    assert float((back - yd).abs().max()) <= 1e-2 * float(yd.max() - yd.min())
    loss.backward()
    assert torch.equal(x.grad, c * (x.detach() > 0))
    assert ca.stats.compressed == 1
    ca.close()


def test_a_later_saver_that_reads_values_tightens_the_coding():
    """Under "auto" ReLU's output is coded coarsely (ReLU reads its signs only); an operation
    that saves it later for its values (here a product, after another tensor was saved and the
    first one encoded) gets it coded again within its own bound, signs still exact."""
    x = smooth(4, 8, 48, 48).requires_grad_()
    w = torch.randn(x.shape, generator=torch.Generator().manual_seed(1)).requires_grad_()
    ca = compress_activations("auto", min_bytes=0)
    with ca:
        y = torch.relu(x * 1)
        z = torch.exp(x * 2)  # another tensor saved: y is encoded (coarsely)
        coarse = float((y.grad_fn._saved_result.detach() - y.detach()).abs().max())
        loss = (y * w).sum() + z.sum()  # mul saves y for w's gradient
    back = (y * 1).detach()
    span = float(back.max() - back.min())
    fine = float((y.grad_fn._saved_result.detach() - back).abs().max())
    assert coarse > 1e-2 * span and fine <= 1e-3 * span, (coarse, fine, span)
    loss.backward()
    assert float((w.grad - back).abs().max()) <= 1e-3 * span  # w's gradient: the decoded y
    ca.close()


def test_max_pool_indices_and_integers_are_exact_in_fewer_bytes():
    from l3._activation_coding import pack_exact, pack_sparse, unpack_exact

    x = torch.relu(smooth(4, 16, 64, 64)).requires_grad_()
    ca = compress_activations("auto", min_bytes=0)
    with ca:
        out, idx = nn.functional.max_pool2d(x * 1, 3, 2, 1, return_indices=True)
        loss = out.sum()
    assert torch.equal(out.grad_fn._saved_result1, idx)  # the indices, decoded
    loss.backward()
    g_exact = torch.autograd.grad(nn.functional.max_pool2d(x, 3, 2, 1).sum(), x)[0]
    assert torch.equal(x.grad, g_exact)
    s = ca.stats
    assert s.stored_bytes < s.raw_bytes / 4, s
    ca.close()
    gen = torch.Generator().manual_seed(2)
    for t in (idx, torch.randint(-5, 300, (70000,), generator=gen),
              torch.randint(0, 1 << 31, (30000,), generator=gen), torch.rand(90000) > 0.5):
        coded = pack_exact(t)
        assert coded is not None and coded.nbytes < t.numel() * t.element_size()
        assert torch.equal(unpack_exact(coded, tuple(t.shape), t.dtype), t)
    # Wider than 32 bits: kept as it is.
    assert pack_exact(torch.randint(0, 1 << 40, (30000,), generator=gen)) is None
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        t = torch.relu(torch.randn(3, 5000)).to(dtype)
        t[0, 0] = -0.0
        coded = pack_sparse(t)
        assert coded is not None and coded.nbytes < t.numel() * t.element_size()
        assert torch.equal(unpack_exact(coded, tuple(t.shape), dtype).view(torch.int16 if
                           dtype != torch.float32 else torch.int32),
                           t.view(torch.int16 if dtype != torch.float32 else torch.int32))


def test_a_batchnorm_input_is_kept_within_its_channels_std():
    from l3._activation_sites import NORM_TAU

    g = torch.Generator().manual_seed(3)
    scale = torch.tensor([0.05, 1.0, 20.0, 3.0]).reshape(1, 4, 1, 1)
    x = (smooth(8, 4, 32, 32) * scale + 5).requires_grad_()
    bn = nn.BatchNorm2d(4)
    ca = compress_activations("auto", min_bytes=0)
    with ca:
        y = bn(x * 1)
        loss = (y * torch.randn(y.shape, generator=g)).sum()
    back, xd = y.grad_fn._saved_input.detach(), x.detach()
    std = xd.var(dim=(0, 2, 3), unbiased=False).add(bn.eps).sqrt().reshape(1, 4, 1, 1)
    err = ((back - xd).abs() / std).amax(dim=(0, 2, 3))
    k = NORM_TAU["batch_norm"]
    assert bool((err <= k).all()) and float(err.min()) > k / 4, (err, k)
    assert ca.stats.stored_bytes < ca.stats.raw_bytes / 3, ca.stats
    loss.backward()
    ca.close()


def torchvision_or_skip():
    if torchvision is None:
        pytest.skip("needs torchvision")
    return torchvision


def grads_of(model):
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


def measured_step(model, x, y, bound, wrap=None, steps=3):
    """(relative gradient error against exact activations, raw / stored bytes) of the last
    of ``steps`` compressed steps (a context each, "auto" measuring in the earlier ones), on
    the same weights and batch; ``wrap(model)`` sets up checkpointing after the exact step."""
    model.train()
    model.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    exact = grads_of(model)
    if wrap is not None:
        wrap(model)
    for _ in range(steps):
        model.zero_grad()
        ca = compress_activations(bound, threads=2)
        with ca:
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        s = ca.stats
        ca.close()
    err = float((grads_of(model) - exact).norm() / exact.norm())
    return err, s.raw_bytes / s.stored_bytes


def photos(n, size, seed):
    """``n`` crops (``size`` square) of the repository's sample photographs, normalised as
    torchvision's ImageNet models expect, and ``n`` random labels of 10 classes."""
    from pathlib import Path

    Image = pytest.importorskip("PIL.Image")
    folder = Path(__file__).resolve().parents[2] / "samples"
    images = [torch.from_numpy(np.asarray(Image.open(f).convert("RGB"), dtype=np.float32) / 255)
              for f in sorted(folder.glob("*.png"))]
    images = [a.permute(2, 0, 1) for a in images if min(a.shape[:2]) >= size]
    if not images:
        pytest.skip("no sample photographs")
    g = torch.Generator().manual_seed(seed)
    crops = []
    for _ in range(n):
        a = images[int(torch.randint(len(images), (1,), generator=g))]
        y0 = int(torch.randint(a.shape[1] - size + 1, (1,), generator=g))
        x0 = int(torch.randint(a.shape[2] - size + 1, (1,), generator=g))
        crops.append(a[:, y0:y0 + size, x0:x0 + size])
    mean = torch.tensor([0.485, 0.456, 0.406]).reshape(3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).reshape(3, 1, 1)
    return (torch.stack(crops) - mean) / std, torch.randint(0, 10, (n,), generator=g)


def resnet18_case():
    tv = torchvision_or_skip()
    torch.manual_seed(0)
    model = tv.models.resnet18(num_classes=10)
    x, y = photos(8, 64, seed=4)
    return model, x, y


def test_resnet18_auto_keeps_gradients_within_5_percent_at_over_6x():
    """torchvision's ResNet-18 (BatchNorm, in-place ReLU, max-pooling) on crops of photographs:
    "auto" keeps the gradient within 5 % of the exact one while storing over 6x fewer bytes
    (measured 3.0 % at 7.0x). (Before the per-operator rules: 24 % off at 4.3x.)"""
    model, x, y = resnet18_case()
    err, ratio = measured_step(model, x, y, "auto")
    assert err < 0.05 and ratio > 6, (err, ratio)


@pytest.mark.parametrize("reentrant", [True, False])
def test_resnet18_under_checkpointing(reentrant):
    """Checkpointed stages (each of layer1-4): their inputs, which backward recomputes the
    stage from, are kept exact (zeros as bits); the rest as without checkpointing. (Before:
    30 % off; any lossy stage input flips ReLU masks across the stage.)"""
    import torch.utils.checkpoint as cp

    class Checkpointed(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, t):
            return cp.checkpoint(self.inner, t, use_reentrant=reentrant)

    def wrap(m):
        for name in ("layer1", "layer2", "layer3", "layer4"):
            setattr(m, name, Checkpointed(getattr(m, name)))

    model, x, y = resnet18_case()
    err, ratio = measured_step(model, x.requires_grad_(reentrant), y, "auto", wrap=wrap)
    assert err < 0.05 and ratio > 4, (err, ratio)


def test_a_small_vit_auto_keeps_gradients_within_5_percent_at_over_7x():
    """torchvision's VisionTransformer, 4 blocks of width 192 (LayerNorm, attention, GELU):
    measured 2.6 % at 8.4x. (Before: 7 % off at 5.0x.)"""
    tv = torchvision_or_skip()
    torch.manual_seed(0)
    model = tv.models.VisionTransformer(image_size=64, patch_size=8, num_layers=4, num_heads=3,
                                        hidden_dim=192, mlp_dim=768, num_classes=10)
    nn.init.normal_(model.heads.head.weight, std=0.02)  # (torchvision starts it at zero)
    x, y = photos(8, 64, seed=6)
    err, ratio = measured_step(model, x, y, "auto")
    assert err < 0.05 and ratio > 7, (err, ratio)


def test_auto_codes_the_same_with_or_without_the_model():
    """A context per step, as documented: without ``model=`` each layer is named as its forward
    starts (a global pre-hook), so its input is coded at its own bound, as with ``model=``:
    the same bounds, bytes and gradients, bit for bit. (Before: named when its forward ended,
    so in every new context a layer's input went at the bound of the layer before.)"""
    tv = torchvision_or_skip()
    x, y = photos(4, 64, seed=4)
    runs = []
    for with_model in (False, True):
        torch.manual_seed(0)
        model = tv.models.resnet18(num_classes=10).train()
        names = {id(m): n for n, m in model.named_modules()}
        for _ in range(2):  # the first measures, the second codes at the measured bounds
            model.zero_grad()
            ca = compress_activations("auto", model=model if with_model else None, threads=2)
            with ca:
                loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            ca.close()
        bounds = {names[id(ref())]: ca.bounds()[name] for name, ref in ca._watch.layers}
        s = ca.stats
        runs.append((bounds, (s.saved, s.compressed, s.exact, s.raw_bytes, s.stored_bytes),
                     grads_of(model)))
    (bounds, stats, got), (bounds_m, stats_m, got_m) = runs
    assert len(bounds) == 21 and bounds == bounds_m, (bounds, bounds_m)
    assert stats == stats_m
    assert torch.equal(got, got_m)


def test_resnet18_under_bfloat16_autocast():
    """Under ``torch.autocast`` the weights' bfloat16 copies that convolutions save are not
    activations (before: coded at an activation's bound, 30 % off); the bfloat16 activations
    come back within their bound plus the cast back's half unit."""
    model, x, y = resnet18_case()

    def run(ca):
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            if ca is None:
                loss = nn.functional.cross_entropy(model(x), y)
            else:
                with ca:
                    loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        return grads_of(model)

    model.train()
    exact = run(None)
    for _ in range(3):
        ca = compress_activations("auto", threads=2)
        got = run(ca)
        ca.close()
    err = float((got - exact).norm() / exact.norm())
    ratio = ca.stats.raw_bytes / ca.stats.stored_bytes  # of bfloat16 bytes
    assert err < 0.05 and ratio > 3, (err, ratio)


def test_double_backward_through_compressed_activations():
    """A gradient penalty (backward with create_graph, then backward through it): autograd
    gives the decoded saved tensors their place in the graph again, so the second-order
    gradient is as close as the first."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.Tanh(), nn.Linear(256, 256), nn.GELU(),
                          nn.Linear(256, 1))
    x = torch.randn(512, 64)

    def penalty(ca):
        model.zero_grad()
        xi = x.clone().requires_grad_()
        if ca is None:
            out = model(xi).sum()
        else:
            with ca:
                out = model(xi).sum()
        g, = torch.autograd.grad(out, xi, create_graph=True)
        g.square().sum().backward()
        return grads_of(model)

    exact = penalty(None)
    ca = compress_activations(1e-3, min_bytes=0)
    got = penalty(ca)
    assert ca.stats.compressed >= 2, ca.stats
    err = float((got - exact).norm() / exact.norm())
    assert 0 < err < 0.01, err
    ca.close()


@pytest.mark.parametrize("bound", [1e-2, "auto"])
def test_block_coding_on_the_host(bound):
    """``codec="blocks"``: within the bound, ReLU's signs and zeros kept by the coding itself
    (no sign bits), gradients close to exact ones on a small CNN with BatchNorm."""
    x = torch.relu(smooth(4, 8, 48, 48) * 3)
    ca = compress_activations(1e-2, min_bytes=0, codec="blocks")
    y, packed = round_trip(ca, x)
    coded = packed.future.result()
    assert coded.blocks and coded.pos is None
    assert float((y - x).abs().max()) <= 1e-2 * float(x.max() - x.min())
    assert torch.equal(y > 0, x > 0) and torch.equal(y == 0, x == 0)
    ca.close()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16),
                          nn.ReLU(), nn.Flatten(), nn.Linear(16 * 16 * 16, 10))
    data = smooth(8, 3, 32, 32, seed=4)
    model(data).square().mean().backward()
    exact = torch.cat([p.grad.flatten() for p in model.parameters()])
    for _ in range(2 if bound == "auto" else 1):
        model.zero_grad()
        ca = compress_activations(bound, min_bytes=0, codec="blocks")
        with ca:
            loss = model(data).square().mean()
        loss.backward()
    got = torch.cat([p.grad.flatten() for p in model.parameters()])
    err = float((got - exact).norm() / exact.norm())
    assert 0 < err < 0.05, err
    s = ca.stats.as_dict()
    assert s["compressed"] >= 4 and s["raw_bytes"] > 3 * s["stored_bytes"], s
    ca.close()
    with pytest.raises(l3.ParameterError):
        compress_activations(1e-2, codec="png")
