"""softkmeans.torch: the differentiable K-Means terms against their closed forms and the numpy
engine."""

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from softkmeans import diagnostics  # noqa: E402
from softkmeans._core.responsibilities import RelaxationSpec  # noqa: E402
from softkmeans._engines._array_kernels import block_responsibilities  # noqa: E402
from softkmeans.torch import (  # noqa: E402
    critical_ratio,
    entmax,
    entmax_kmeans_loss,
    expected_distortion,
    hard_kmeans_loss,
    kmeans_loss,
    responsibilities,
    tied_sigma,
)

LOSSES = {
    "softmax": kmeans_loss,
    "entmax15": entmax_kmeans_loss,
    "sparsemax": lambda h, c, s, **kw: entmax_kmeans_loss(h, c, s, alpha=2.0, **kw),
    "entmax125": lambda h, c, s, **kw: entmax_kmeans_loss(h, c, s, alpha=1.25, **kw),
}
ALPHAS = {"softmax": None, "entmax15": 1.5, "sparsemax": 2.0, "entmax125": 1.25}


@pytest.fixture(autouse=True)
def one_thread():
    """Problems of a few rows: threads only add overhead (and stall on a busy machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def problem(n=7, k=3, d=2, seed=0, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(n, d, generator=gen, dtype=dtype)
    centers = torch.randn(k, d, generator=gen, dtype=dtype)
    return h, centers


def numpy_rows(h, centers, sigma, alpha):
    X, C = h.detach().double().numpy(), centers.detach().double().numpy()
    D = ((X[:, None, :] - C[None]) ** 2).sum(-1)
    spec = RelaxationSpec("softmax", sigma) if alpha is None else RelaxationSpec(
        "entmax", sigma, alpha)
    return block_responsibilities(D, spec)


def test_importing_softkmeans_does_not_import_torch():
    code = ("import sys, softkmeans, softkmeans.diagnostics, softkmeans.experiments; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("kind", LOSSES)
@pytest.mark.parametrize("sigma", [0.3, 1.0, 4.0])
def test_values_and_responsibilities_match_the_numpy_engine(kind, sigma):
    h, centers = problem(n=40, k=5, d=3)
    ours = LOSSES[kind](h, centers, sigma, reduction="none")
    block = numpy_rows(h, centers, sigma, ALPHAS[kind])
    np.testing.assert_allclose(ours.numpy(), block.row_objective, rtol=1e-10, atol=1e-12)
    resp = responsibilities(h, centers, sigma, alpha=ALPHAS[kind])
    np.testing.assert_allclose(resp.numpy(), block.resp, rtol=1e-9, atol=1e-12)
    if ALPHAS[kind] is not None:
        assert ((resp == 0) == (torch.as_tensor(block.resp) == 0)).all()  # exact zeros


@pytest.mark.parametrize("alpha", [None, 1.5])
def test_responsibilities_match_the_public_diagnostics(alpha):
    h, centers = problem(n=30, k=4)
    ours = responsibilities(h, centers, 0.5, alpha=alpha)
    ref = diagnostics.responsibilities(h.numpy(), centers.numpy(), 0.5, alpha=alpha,
                                       backend="numpy")
    np.testing.assert_allclose(ours.numpy(), ref, rtol=1e-10, atol=1e-14)


def test_entmax15_pruned_sort_is_exact_with_many_clusters_and_ties():
    gen = torch.Generator().manual_seed(1)
    z = torch.randn(64, 200, generator=gen, dtype=torch.float64) * 3
    z[:5, :3] = z[:5].max(1, keepdim=True).values  # three-way ties at the top
    z[5] = 0.0  # a uniform row keeps every entry as a candidate
    from softkmeans.torch._functional import _entmax_rows

    pruned, full = _entmax_rows(z, 1.5, True), _entmax_rows(z, 1.5, False)
    np.testing.assert_array_equal(pruned.numpy(), full.numpy())
    D = -2.0 * (z - z.max(1, keepdim=True).values)  # logits -D / (2 sigma^2) at sigma = 1
    ref = block_responsibilities(D.numpy(), RelaxationSpec("entmax", 1.0))
    np.testing.assert_allclose(pruned.numpy(), ref.resp, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(pruned.sum(1).numpy(), 1.0, rtol=1e-14)
    np.testing.assert_allclose(entmax(z).numpy(), pruned.numpy(), rtol=0, atol=0)


@pytest.mark.parametrize("kind", LOSSES)
def test_gradients_match_finite_differences(kind):
    h, centers = problem(n=6, k=3)
    h.requires_grad_(True)
    centers.requires_grad_(True)
    sigma = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    loss = LOSSES[kind]
    assert torch.autograd.gradcheck(lambda a, b, s: loss(a, b, s, reduction="none"),
                                    (h, centers, sigma))


@pytest.mark.parametrize("kind", ["softmax", "entmax15"])
def test_second_derivatives_match_finite_differences(kind):
    h, centers = problem(n=5, k=3)
    h.requires_grad_(True)
    centers.requires_grad_(True)
    loss = LOSSES[kind]
    assert torch.autograd.gradgradcheck(lambda a, b: loss(a, b, 0.8, reduction="sum"),
                                        (h, centers))


@pytest.mark.parametrize("kind", LOSSES)
def test_gradients_are_the_responsibility_weighted_forces(kind):
    h, centers = problem(n=20, k=4)
    h.requires_grad_(True)
    centers.requires_grad_(True)
    sigma = torch.tensor(0.6, dtype=torch.float64, requires_grad=True)
    LOSSES[kind](h, centers, sigma, reduction="sum").backward()
    r = responsibilities(h, centers, sigma, alpha=ALPHAS[kind]).detach()
    hd, cd = h.detach(), centers.detach()
    np.testing.assert_allclose(h.grad, 2 * (hd - r @ cd), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(centers.grad, 2 * (r.sum(0)[:, None] * cd - r.T @ hd),
                               rtol=1e-11, atol=1e-12)
    alpha = ALPHAS[kind]
    if alpha is None:
        entropy = -torch.special.xlogy(r, r).sum()
    else:
        entropy = ((1 - r.pow(alpha).sum(1)) / (alpha * (alpha - 1))).sum()
    np.testing.assert_allclose(sigma.grad, -4 * 0.6 * entropy, rtol=1e-11)


def margin_problem(beta, n=200, k=4, seed=0):
    """Blobs and their cluster means, with sigma such that Delta_min / (2 sigma^2) = beta."""
    gen = torch.Generator().manual_seed(seed)
    means = torch.tensor([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0], [6.0, 6.0]],
                         dtype=torch.float64)[:k]
    labels = torch.arange(n) % k
    h = means[labels] + torch.randn(n, 2, generator=gen, dtype=torch.float64)
    d = ((h[:, None] - means[None]) ** 2).sum(-1)
    two = d.topk(2, dim=1, largest=False).values
    delta_min = float((two[:, 1] - two[:, 0]).min())
    sigma = (delta_min / (2 * beta)) ** 0.5
    return h, means, sigma


def test_at_beta_64_the_reduced_gradients_are_those_of_the_hard_distortion():
    h, centers, sigma = margin_problem(64.0)
    grads = {}
    for name, fn in [("J", lambda a: hard_kmeans_loss(a, centers, reduction="sum")),
                     ("F", lambda a: kmeans_loss(a, centers, sigma, reduction="sum")),
                     ("F15", lambda a: entmax_kmeans_loss(a, centers, sigma, reduction="sum"))]:
        x = h.clone().requires_grad_(True)
        fn(x).backward()
        grads[name] = x.grad
    assert (grads["J"].norm(dim=1) > 0).all()
    np.testing.assert_allclose(grads["F"], grads["J"], rtol=4e-16, atol=0)
    np.testing.assert_array_equal(grads["F15"], grads["J"])


@pytest.mark.parametrize("beta", [8.0, 64.0])
def test_expected_distortion_gradient_through_the_saturated_softmax(beta):
    """dD_i/dd_ij = r_ij + sum_l d_il dr_il/dd_ij = r_ij - (1/tau) sum_l r_ij r_il (d_ij - d_il):
    the second term is the softmax Jacobian applied to the distances, of order beta e^-beta
    at the second-nearest centroid; checked against this pairwise form, free of cancellation."""
    h, centers, sigma = margin_problem(beta)
    tau = 2 * sigma**2
    d = ((h[:, None] - centers[None]) ** 2).sum(-1)
    r = responsibilities(h, centers, sigma)
    pairwise = (r[:, :, None] * r[:, None, :] * (d[:, :, None] - d[:, None, :])).sum(2)
    coef = r - pairwise / tau
    from softkmeans.torch._functional import _expected_distortion_rows

    _, _, ours, _ = _expected_distortion_rows(d, torch.tensor(tau, dtype=torch.float64))
    np.testing.assert_allclose(ours, coef, rtol=1e-10, atol=0)
    second = d.argsort(1)[:, 1:2]
    extra = (coef - r).gather(1, second).abs().max()  # the Jacobian term's largest entry
    assert beta * np.exp(-beta) * 1e-2 < extra < beta * np.exp(-beta) * 1e2
    x = h.clone().requires_grad_(True)
    expected_distortion(x, centers, sigma, reduction="sum").backward()
    formula = 2 * (coef.sum(1, keepdim=True) * h - coef @ centers)
    np.testing.assert_allclose(x.grad, formula, rtol=1e-13, atol=1e-14)
    # plain autograd through torch.softmax agrees where the term is above rounding
    if beta < 10:
        y = h.clone().requires_grad_(True)
        dy = ((y[:, None] - centers[None]) ** 2).sum(-1)
        (torch.softmax(-dy / tau, 1) * dy).sum().backward()
        np.testing.assert_allclose(x.grad, y.grad, rtol=1e-10, atol=1e-12)


def test_expected_distortion_gradients_match_finite_differences():
    h, centers = problem(n=6, k=3)
    h.requires_grad_(True)
    centers.requires_grad_(True)
    sigma = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda a, b, s: expected_distortion(a, b, s, reduction="none"), (h, centers, sigma))
    assert torch.autograd.gradgradcheck(
        lambda a, b: expected_distortion(a, b, 0.7, reduction="sum"), (h, centers))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("sigma", [1e-30, 1e-200, 1e30])
def test_extreme_temperatures_stay_finite_and_tend_to_the_limits(dtype, sigma):
    h, centers = problem(n=10, k=3, dtype=dtype)
    h.requires_grad_(True)
    for loss in (kmeans_loss, entmax_kmeans_loss):
        value = loss(h, centers, sigma, reduction="none")
        if sigma < 1:
            np.testing.assert_allclose(value.detach(), hard_kmeans_loss(
                h, centers, reduction="none").detach(), rtol=1e-6)
            value.sum().backward()
            assert torch.isfinite(h.grad).all()
            h.grad = None
        else:
            assert not torch.isnan(value).any()
    r = responsibilities(h, centers, sigma)
    assert torch.isfinite(r).all()
    np.testing.assert_allclose(r.sum(1).detach(), 1.0, rtol=1e-6)


def test_reductions_weights_and_batch_shapes():
    h, centers = problem(n=12, k=3)
    rows = kmeans_loss(h, centers, 0.5, reduction="none")
    assert torch.allclose(kmeans_loss(h, centers, 0.5), rows.mean())
    assert torch.allclose(kmeans_loss(h, centers, 0.5, reduction="sum"), rows.sum())
    w = torch.rand(12, dtype=torch.float64)
    assert torch.allclose(kmeans_loss(h, centers, 0.5, weight=w), (w * rows).sum() / w.sum())
    batched = kmeans_loss(h.reshape(3, 4, 2), centers, 0.5, reduction="none")
    assert batched.shape == (3, 4) and torch.equal(batched.reshape(-1), rows)
    assert responsibilities(h.reshape(3, 4, 2), centers, 0.5).shape == (3, 4, 3)


@pytest.mark.parametrize(("call", "match"), [
    (lambda h, c: kmeans_loss(h, c, 0.0), "sigma must be a positive"),
    (lambda h, c: kmeans_loss(h, c, float("nan")), "sigma must be a positive"),
    (lambda h, c: kmeans_loss(h, c, 1.0, reduction="avg"), "reduction must be one of"),
    (lambda h, c: kmeans_loss(h[:, :1], c, 1.0), r"h must have shape \(\.\.\., 2\)"),
    (lambda h, c: kmeans_loss(h, c[0], 1.0), "centers must have shape"),
    (lambda h, c: entmax_kmeans_loss(h, c, 1.0, alpha=1.0), "alpha must be"),
    (lambda h, c: kmeans_loss(h.numpy(), c, 1.0), "must be torch tensors"),
    (lambda h, c: kmeans_loss(h, c, torch.ones(2)), "sigma must be a scalar"),
    (lambda h, c: tied_sigma(h, c, relative_sigma=-1), "relative_sigma must be"),
])
def test_bad_arguments_are_named(call, match):
    h, centers = problem()
    with pytest.raises((ValueError, TypeError), match=match):
        call(h, centers)


@pytest.mark.parametrize("alpha", [1.5, 2.0, 1.25])
@pytest.mark.parametrize("shape", [(0, 5), (2, 0, 5), (3, 0)])
def test_entmax_of_nothing_is_empty(alpha, shape):
    z = torch.zeros(shape, dtype=torch.float64, requires_grad=True)
    p = entmax(z, alpha)
    assert p.shape == shape
    p.sum().backward()
    assert z.grad.shape == shape


@pytest.mark.parametrize("kind", [*LOSSES, "expected", "hard"])
def test_losses_and_responsibilities_on_no_rows(kind):
    """No rows: "none" is empty, "sum" is 0 and "mean" NaN (0 / 0), as torch's losses
    (``mse_loss`` of empty tensors is NaN)."""
    _, centers = problem(k=3)
    h = torch.zeros(2, 0, 2, dtype=torch.float64, requires_grad=True)
    fn = {"expected": expected_distortion,
          "hard": lambda a, c, s, **kw: hard_kmeans_loss(a, c, **kw)}.get(kind) or LOSSES.get(kind)
    assert fn(h, centers, 0.5, reduction="none").shape == (2, 0)
    total = fn(h, centers, 0.5, reduction="sum")
    assert total.item() == 0.0
    total.backward()
    assert h.grad.shape == h.shape
    assert torch.isnan(fn(h, centers, 0.5))
    assert torch.isnan(torch.nn.functional.mse_loss(h[0], h[0]))
    if kind in ALPHAS:
        assert responsibilities(h, centers, 0.5, alpha=ALPHAS[kind]).shape == (2, 0, 3)


@pytest.mark.parametrize("alpha", [1.25, 1.5, 2.0])
def test_a_nan_makes_its_row_nan(alpha):
    """As torch.softmax: the row with a NaN is NaN, with a NaN gradient; others are
    untouched."""
    nan = float("nan")
    z = torch.tensor([[0.0, nan, 1.0], [0.0, 0.5, 1.0]], dtype=torch.float64,
                     requires_grad=True)
    p = entmax(z, alpha)
    assert torch.isnan(p[0]).all()
    assert torch.equal(p[1], entmax(z[1:].detach(), alpha)[0])
    (p * torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)).sum().backward()
    assert torch.isnan(z.grad[0]).all() and torch.isfinite(z.grad[1]).all()
    assert torch.isnan(torch.softmax(z.detach(), -1)[0]).all()
    h, centers = problem(n=4, k=3)
    h[2, 1] = nan
    for a in (None, alpha):
        r = responsibilities(h, centers, 0.5, alpha=a)
        assert torch.isnan(r[2]).all() and torch.isfinite(r[[0, 1, 3]]).all(), a


@pytest.mark.parametrize("value", [-0.5, 0.0, float("nan"), float("inf")])
def test_a_tensor_sigma_is_checked_when_eager(value):
    """Eagerly a tensor sigma is checked like a float one (one host sync)."""
    h, centers = problem()
    sigma = torch.tensor(value, dtype=torch.float64)
    for fn in (kmeans_loss, entmax_kmeans_loss, expected_distortion, responsibilities):
        with pytest.raises(ValueError, match="sigma must be a positive finite number"):
            fn(h, centers, sigma)


def test_what_an_unchecked_tensor_sigma_gives_under_compile():
    """Compiled (no host sync, no check): 0 is the hard limit, a negative sigma acts as its
    absolute value, inf gives uniform responsibilities and a loss of -inf, NaN gives NaN."""
    h, centers = problem(n=10, k=3)
    torch._dynamo.reset()
    loss = torch.compile(lambda s: kmeans_loss(h, centers, s, reduction="none"),
                         fullgraph=True, backend="aot_eager")
    resp = torch.compile(lambda s: responsibilities(h, centers, s), fullgraph=True,
                         backend="aot_eager")

    def tensor(value):
        return torch.tensor(value, dtype=torch.float64)

    np.testing.assert_allclose(loss(tensor(0.0)), hard_kmeans_loss(h, centers, reduction="none"),
                               rtol=1e-12)
    assert torch.equal(loss(tensor(-0.5)), loss(tensor(0.5)))
    np.testing.assert_allclose(resp(tensor(float("inf"))), 1 / 3, rtol=1e-15)
    assert torch.isneginf(loss(tensor(float("inf")))).all()
    assert torch.isnan(loss(tensor(float("nan")))).all()


def test_autocast_computes_distances_in_float32():
    h, centers = problem(n=64, k=5, d=8, dtype=torch.float32)
    h = h * 100 + 1000  # far from the origin: bfloat16 distances would be off by ~1e4
    centers = centers * 100 + 1000
    ref = kmeans_loss(h, centers, 5.0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        value = kmeans_loss(h, centers, 5.0)
        half = kmeans_loss(h.bfloat16(), centers.bfloat16(), 5.0)
    assert value.dtype == half.dtype == torch.float32
    assert torch.allclose(value, ref, rtol=1e-6)


@pytest.mark.parametrize("kind", ["softmax", "entmax15", "expected"])
def test_derivatives_under_autocast_are_float32(kind):
    """The backward and forward-mode passes run their products outside autocast too, also
    when backward() is called inside the autocast region."""
    h, centers = problem(n=64, k=5, d=8, dtype=torch.float32)
    h, centers = h * 100 + 1000, centers * 100 + 1000
    fn = FUNCTIONS[kind]
    tangent = torch.ones_like(h)
    grads = []
    for enabled in (False, True):
        x, c = h.clone().requires_grad_(True), centers.clone().requires_grad_(True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            fn(x, c, 5.0, reduction="sum").backward()
            _, jvp = torch.func.jvp(lambda a: fn(a, centers, 5.0, reduction="sum"), (h,),
                                    (tangent,))
        grads.append((x.grad, c.grad, jvp))
    for ours, ref in zip(grads[1], grads[0], strict=True):
        assert ours.dtype == torch.float32
        np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-3)


def test_torch_func_transforms():
    h, centers = problem(n=8, k=3)
    for alpha in (None, 1.5):
        def loss(c, x, alpha=alpha):
            if alpha is None:
                return kmeans_loss(x, c, 0.5, reduction="sum")
            return entmax_kmeans_loss(x, c, 0.5, alpha=alpha, reduction="sum")

        grad = torch.func.grad(loss)(centers, h)
        c = centers.clone().requires_grad_(True)
        loss(c, h).backward()
        np.testing.assert_allclose(grad, c.grad, rtol=1e-12)
        per_row = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0))(centers, h[:, None])
        np.testing.assert_allclose(per_row.sum(0), grad, rtol=1e-10, atol=1e-12)
        jac = torch.func.jacrev(lambda c, x: loss(c, x[None]).reshape(1), argnums=1)
        rows = torch.func.vmap(jac, in_dims=(None, 0))(centers, h)
        x = h.clone().requires_grad_(True)
        loss(centers, x).backward()
        np.testing.assert_allclose(rows.reshape(8, 2), x.grad, rtol=1e-12)


FUNCTIONS = {**LOSSES, "expected": expected_distortion,
             "resp": lambda h, c, s, **kw: responsibilities(h, c, s),
             "resp15": lambda h, c, s, **kw: responsibilities(h, c, s, alpha=1.5)}


@pytest.mark.parametrize("kind", FUNCTIONS)
def test_forward_mode_matches_finite_differences(kind):
    """jvp (and jvp under vmap, as jacfwd uses it) of every custom autograd Function
    against finite differences, then forward mode over the backward pass (Hessian-vector
    products) against finite differences of the gradient."""
    h, centers = problem(n=6, k=3)
    h.requires_grad_(True)
    centers.requires_grad_(True)
    sigma = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    fn = FUNCTIONS[kind]
    if kind.startswith("resp"):
        def call(a, b, s):
            return fn(a, b, s)
    else:
        def call(a, b, s):
            return fn(a, b, s, reduction="none")

    assert torch.autograd.gradcheck(call, (h, centers, sigma), check_forward_ad=True,
                                    check_backward_ad=False, check_batched_forward_grad=True,
                                    fast_mode=True)
    assert torch.autograd.gradgradcheck(lambda a, b: call(a, b, 0.8).sum(), (h, centers),
                                        check_fwd_over_rev=True, check_rev_over_rev=False,
                                        check_undefined_grad=False, fast_mode=True)


def test_entmax_forward_mode_matches_finite_differences():
    z = torch.randn(5, 7, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for alpha in (1.5, 2.0, 1.25, 3.0):
        assert torch.autograd.gradcheck(lambda x, a=alpha: entmax(x, a, dim=0),
                                        (z.requires_grad_(True),), check_forward_ad=True,
                                        fast_mode=True)


@pytest.mark.parametrize("kind", LOSSES)
@pytest.mark.parametrize("beta", [1.0, 64.0])
def test_forward_derivative_is_the_responsibility_weighted_force(kind, beta):
    """dF = sum_i 2 (h_i - sum_j r_ij mu_j) . dh_i + 2 sum_ij r_ij (mu_j - h_i) . dmu_j
    - 4 sigma dsigma sum_i H(r_i): the backward pass's forces dotted with the tangents, by
    torch.func.jvp and by torch.autograd.forward_ad; at beta = 64 those of J."""
    import torch.autograd.forward_ad as fwAD

    h, centers, sigma = margin_problem(beta)
    loss = LOSSES[kind]
    gen = torch.Generator().manual_seed(1)
    dh, dmu = torch.randn(h.shape, generator=gen, dtype=h.dtype), torch.randn(
        centers.shape, generator=gen, dtype=h.dtype)
    primals = (h, centers, torch.tensor(sigma, dtype=torch.float64))
    tangents = (dh, dmu, torch.tensor(0.3, dtype=torch.float64))

    def total(a, b, s):
        return loss(a, b, s, reduction="sum")

    value, tangent = torch.func.jvp(total, primals, tangents)
    leaves = [x.clone().requires_grad_(True) for x in primals]
    total(*leaves).backward()
    force = sum((leaf.grad * t).sum() for leaf, t in zip(leaves, tangents, strict=True))
    np.testing.assert_allclose(tangent, force, rtol=1e-12)
    with fwAD.dual_level():
        dual = total(*(fwAD.make_dual(x, t) for x, t in zip(primals, tangents, strict=True)))
        np.testing.assert_allclose(fwAD.unpack_dual(dual).tangent, tangent, rtol=1e-14)
    if beta == 64.0:
        _, hard = torch.func.jvp(lambda a: hard_kmeans_loss(a, centers, reduction="sum"),
                                 (h,), (dh,))
        _, ours = torch.func.jvp(lambda a: total(a, centers, sigma), (h,), (dh,))
        assert hard != 0
        np.testing.assert_allclose(ours, hard, rtol=1e-14)


@pytest.mark.parametrize("kind", FUNCTIONS)
def test_jacfwd_agrees_with_jacrev(kind):
    h, centers = problem(n=5, k=3)
    sigma = torch.tensor(0.6, dtype=torch.float64)
    fn = FUNCTIONS[kind]
    forward = torch.func.jacfwd(fn, argnums=(0, 1, 2))(h, centers, sigma)
    reverse = torch.func.jacrev(fn, argnums=(0, 1, 2))(h, centers, sigma)
    for fwd, rev in zip(forward, reverse, strict=True):
        np.testing.assert_allclose(fwd, rev, rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("kind", ["softmax", "entmax15", "expected"])
def test_hessian_by_forward_over_reverse(kind):
    """torch.func.hessian (jacfwd of jacrev) against reverse over reverse; for F_sigma the
    block of row i is 2 I - (2 / sigma^2) sum_j r_ij (mu_j - m_i)(mu_j - m_i)^T, with
    m_i = sum_j r_ij mu_j, and rows do not interact."""
    h, centers = problem(n=5, k=3)
    sigma = 0.6
    fn = FUNCTIONS[kind]
    hess = torch.func.hessian(lambda a: fn(a, centers, sigma, reduction="sum"))(h)
    ref = torch.autograd.functional.hessian(
        lambda a: fn(a, centers, sigma, reduction="sum"), h)
    np.testing.assert_allclose(hess, ref, rtol=1e-11, atol=1e-13)
    full = torch.func.hessian(lambda b: fn(h, b, sigma, reduction="sum"))(centers)
    np.testing.assert_allclose(full, torch.autograd.functional.hessian(
        lambda b: fn(h, b, sigma, reduction="sum"), centers), rtol=1e-11, atol=1e-13)
    if kind == "softmax":
        r = responsibilities(h, centers, sigma)
        spread = centers[None] - (r @ centers)[:, None]  # mu_j - m_i
        cov = torch.einsum("ij,ija,ijb->iab", r, spread, spread)
        block = 2 * torch.eye(2, dtype=h.dtype) - 2 / sigma**2 * cov
        expected = torch.zeros(5, 2, 5, 2, dtype=h.dtype)
        for i in range(5):
            expected[i, :, i] = block[i]
        np.testing.assert_allclose(hess, expected, rtol=1e-10, atol=1e-12)


def test_dynamo_does_not_trace_a_custom_jvp():
    """Why the losses drop their forward-mode rule under torch.compile. When this starts to
    fail, Dynamo traces a custom jvp and ``_functional._with_forward_mode`` can go."""
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.save_for_forward(inputs[0])

        @staticmethod
        def backward(ctx, grad):
            return 2 * grad * ctx.saved_tensors[0]

        @staticmethod
        def jvp(ctx, tangent):
            return 2 * tangent * ctx.saved_tensors[0]

    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.Unsupported, match="custom jvp"):
        torch.compile(Square.apply, fullgraph=True, backend="eager")(
            torch.ones(2, requires_grad=True))


def test_tied_sigma_carries_no_tangent():
    h, centers = problem(n=20, k=3)
    _, tangent = torch.func.jvp(lambda a: tied_sigma(a, centers), (h,), (torch.ones_like(h),))
    assert tangent == 0


def test_critical_ratio_and_tied_sigma():
    h, centers = problem(n=50, k=3)
    lam = float(torch.linalg.eigvalsh(torch.cov(h.T, correction=0))[-1])
    assert critical_ratio(h, 0.5) == pytest.approx(lam / 0.25, rel=1e-12)
    d = ((h[:, None] - centers[None]) ** 2).sum(-1).min(1).values
    assert float(tied_sigma(h, centers, 0.1)) == pytest.approx(float((0.1 * d.mean()).sqrt()))


# ----------------------------------------------------------------------------- modules

from softkmeans.torch import KMeansTerm, SoftVectorQuantizer, code_usage  # noqa: E402


def test_kmeans_term_state_lives_in_buffers():
    term = KMeansTerm(3, 2, sigma=0.5)
    assert set(term.state_dict()) == {"centers", "sigma"}
    assert not list(term.parameters())
    half = KMeansTerm(3, 2).half()
    assert half.centers.dtype == half.sigma.dtype == torch.float16
    h = torch.randn(20, 2, dtype=torch.float16)
    assert half(h).dtype == torch.float32  # distances in float32
    moved = KMeansTerm(3, 2).to(torch.float64)
    assert moved.centers.dtype == torch.float64
    learned = KMeansTerm(3, 2, learn_centers=True)
    assert [name for name, _ in learned.named_parameters()] == ["centers"]
    copy = KMeansTerm(3, 2, sigma=0.5)
    copy.load_state_dict(term.state_dict())
    assert torch.equal(copy.centers, term.centers)


def test_update_centers_is_the_alternating_step_and_decreases_the_objective():
    h, _, _ = margin_problem(1.0, n=120)
    h = h.float()
    for alpha in (None, 1.5):
        term = KMeansTerm(4, 2, sigma=1.0, alpha=alpha)
        with torch.no_grad():
            term.centers.copy_(h[:4] + 0.5)
        old = term.centers.clone()
        before = term(h)
        r = responsibilities(h, old, 1.0, alpha=alpha)
        expected = r.T @ h / r.sum(0)[:, None]
        term.update_centers(h)
        np.testing.assert_allclose(term.centers, expected, rtol=1e-5, atol=1e-6)
        mass = r.sum(0)
        drop = (mass * ((term.centers - old) ** 2).sum(1)).sum() / len(h)
        assert before - term(h) >= drop * (1 - 1e-4)  # sufficient decrease, per row


def test_update_centers_keeps_a_centroid_without_mass():
    h = torch.tensor([[0.0], [0.1], [5.0], [5.1]])
    term = KMeansTerm(3, 1, sigma=0.1, alpha=1.5)
    with torch.no_grad():
        term.centers.copy_(torch.tensor([[0.0], [5.0], [100.0]]))
    term.update_centers(h, n_iter=3)
    np.testing.assert_allclose(term.centers.squeeze(), [0.05, 5.05, 100.0], rtol=1e-6)


def test_tied_temperature_follows_the_batch():
    torch.manual_seed(0)
    h = torch.randn(200, 3)
    term = KMeansTerm(5, 3).init_centers(h, n_init=2, random_state=0)
    assert torch.isclose(term.sigma, tied_sigma(h, term.centers))
    term(h * 3)  # training mode: the batch sets the temperature
    assert torch.isclose(term.sigma, tied_sigma(h * 3, term.centers))
    term.eval()
    before = term.sigma.clone()
    term(h)
    assert torch.equal(term.sigma, before)
    ratio = term.critical_ratio(h)
    assert ratio == pytest.approx(critical_ratio(h, before), rel=1e-6)
    assert term.predict(h).shape == (200,)
    assert term.responsibilities(h.reshape(20, 10, 3)).shape == (20, 10, 5)


def _compiled(module):
    """``torch.compile(module, fullgraph=True)`` on the aot_eager backend: no C compiler
    needed, and its random draws are eager's, so results compare bit for bit."""
    torch._dynamo.reset()
    return torch.compile(module, fullgraph=True, backend="aot_eager")


def test_kmeans_term_compiles_without_graph_breaks():
    """Training mode (the batch sets the temperature) and evaluation mode, before a tied
    temperature is set (NaN: from the batch) and after (the buffer)."""
    import copy

    h = torch.randn(16, 3, generator=torch.Generator().manual_seed(0))
    term = KMeansTerm(4, 3)
    module = copy.deepcopy(term)
    compiled = _compiled(module)
    for mode in ("eval", "train", "eval"):
        term.train(mode == "train")
        module.train(mode == "train")
        x, y = (h.clone().requires_grad_(True) for _ in range(2))
        value, eager = compiled(x), term(y)
        value.backward()
        eager.backward()
        assert torch.equal(value, eager) and torch.equal(x.grad, y.grad), mode
        torch.testing.assert_close(module.sigma, term.sigma, rtol=0, atol=0, equal_nan=True)


def _vq_steps(vq, batches, masked=False):
    """Forward and backward of ``vq`` on each batch (``masked``: every fifth vector masked):
    outputs, input gradients and the number of dead codes before each step."""
    torch.manual_seed(1)
    steps = []
    for batch in batches:
        dead = int((vq.usage < vq.dead_threshold).sum())
        z = batch.clone().requires_grad_(True)
        out = vq(z, mask=torch.arange(len(z)) % 5 > 0) if masked else vq(z)
        (out.quantized.square().sum() + out.loss).backward()
        steps.append((out.quantized.detach(), out.codes, out.loss.detach(), z.grad, dead))
    return steps


@pytest.mark.parametrize("config", [
    {"assignment": "hard", "update": "ema", "reset_every": 2, "sync": True},
    {"assignment": "entmax", "update": "gradient"},
    {"assignment": "softmax", "update": "ema", "reset_every": 2, "sync": True, "cosine": True,
     "heads": 2, "codebook_dim": 2, "decay": 1.0, "dead_threshold": 8.0, "masked": True},
])
def test_vector_quantizer_training_step_compiles_without_graph_breaks(config, tmp_path):
    """fullgraph=True: the first step's initialization and the dead-code resets are
    branches on buffer values (torch.cond while compiling), the counts a scatter. Eager
    and compiled agree bit for bit on outputs, gradients and every buffer over steps that
    initialize, reset, all-reduce (a one-process gloo group), change the batch size, mask
    vectors and see an empty batch."""
    import copy

    import torch.distributed as dist

    config = dict(config)
    masked = config.pop("masked", False)
    gen = torch.Generator().manual_seed(0)
    centers = torch.tensor([[0.0, 0.0, 0.0], [4.0, 0.0, 0.0]])
    batches = [centers[torch.arange(n) % 2] + 0.5 * torch.randn(n, 3, generator=gen)
               for n in (64, 64, 0, 64, 40)]
    eager = SoftVectorQuantizer(16, 3, **{"decay": 0.5, **config})
    module = copy.deepcopy(eager)
    if config.get("sync"):
        dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'init'}", rank=0,
                                world_size=1)
    try:
        ours = _vq_steps(_compiled(module), batches, masked)
        expected = _vq_steps(eager, batches, masked)
    finally:
        if config.get("sync"):
            dist.destroy_process_group()
    for step, (got, want) in enumerate(zip(ours, expected, strict=True)):
        for a, b in zip(got[:4], want[:4], strict=True):
            assert torch.equal(a, b), step
        assert got[4] == want[4], step
    if config.get("reset_every"):
        assert expected[3][4] > 0  # the reset at step 2 had dead codes to move
    for (name, a), b in zip(eager.state_dict().items(), module.state_dict().values(),
                            strict=True):
        assert torch.equal(a, b), name
    if config["update"] == "gradient":
        assert torch.equal(eager.codebook.grad, module.codebook.grad)


def test_vector_quantizer_evaluation_compiles_without_graph_breaks():
    vq = SoftVectorQuantizer(8, 3, update="gradient")
    h = torch.randn(16, 3)
    vq(h)  # initializes the codebook
    vq.eval()
    out = _compiled(vq)(h)
    assert torch.equal(out.loss, vq(h).loss) and torch.equal(out.codes, vq(h).codes)


def _digits_autoencoder():
    """Digits scaled to [0, 1] and an autoencoder pretrained on them (the reproduction's)."""
    from sklearn.datasets import load_digits

    from softkmeans.experiments.deep import _autoencoder

    X, y = load_digits(return_X_y=True)
    X = torch.tensor(X / 16.0, dtype=torch.float32)
    return X, y, *_autoencoder(torch, X, seed=0, epochs=15)


def _fine_tune(X, y, encoder, decoder, params, term):
    """Reconstruction + 0.1 x term for 20 epochs; (min ratio, last ratio, NMI)."""
    from softkmeans.experiments.deep import _fine_tune as fine_tune

    record = fine_tune(torch, X, y, (encoder, decoder, params), term, seed=0, epochs=20)
    return record["ratio_min"], record["ratio_last"], record["nmi"]


def test_deep_clustering_on_digits_collapses_only_with_a_fixed_temperature():
    """Reconstruction + 0.1 x F_sigma, closed-form centroids once per epoch: tied to the
    scale, lambda_max / sigma^2 stays above 1 and the clusters stay; fixed at its initial
    value, the term contracts the representation below the critical temperature and the
    clustering collapses (Prop. 9)."""
    X, y, encoder, decoder, params = _digits_autoencoder()
    with torch.no_grad():
        H = encoder(X)
    term = KMeansTerm(10, 10).init_centers(H, n_init=3, random_state=0)
    start = {"params": [p.detach().clone() for p in params],
             "centers": term.centers.clone(), "sigma": float(term.sigma)}
    results = {"tied": _fine_tune(X, y, encoder, decoder, params, term)}
    with torch.no_grad():
        for p, s in zip(params, start["params"], strict=True):
            p.copy_(s)
    term = KMeansTerm(10, 10, sigma=start["sigma"])
    term.centers.copy_(start["centers"])
    results["fixed"] = _fine_tune(X, y, encoder, decoder, params, term)
    tied_min, _, tied_nmi = results["tied"]
    _, fixed_last, fixed_nmi = results["fixed"]
    assert tied_min > 2 and tied_nmi > 0.6
    assert fixed_last < 1 and fixed_nmi < 0.1


def test_vector_quantizer_forward_straight_through_and_commitment():
    torch.manual_seed(0)
    vq = SoftVectorQuantizer(6, 3, assignment="hard", update="gradient", commitment=0.5)
    z = torch.randn(4, 5, 3, requires_grad=True)
    out = vq(z)
    codebook = vq.codebook.detach()
    d = ((z.detach()[..., None, :] - codebook) ** 2).sum(-1)
    assert torch.equal(out.codes, d.argmin(-1))
    assert torch.allclose(out.quantized, codebook[out.codes], atol=1e-6)
    (out.quantized * torch.arange(3.0)).sum().backward(retain_graph=True)
    assert torch.equal(z.grad, torch.arange(3.0).expand(4, 5, 3))  # straight through
    gap = ((z.detach() - codebook[out.codes]) ** 2).mean()
    assert torch.isclose(out.loss, 1.5 * gap)  # commitment 0.5 + codebook loss 1
    vq.codebook.grad = None
    out.loss.backward()
    assert vq.codebook.grad is not None


def test_updates_under_autocast_are_float32():
    """The closed-form and moving-average updates keep float32 statistics when the step
    runs inside an autocast region."""
    import copy

    gen = torch.Generator().manual_seed(0)
    z = torch.randn(256, 8, generator=gen) * 30 + 500
    terms, quantizers = [KMeansTerm(4, 8), None], [SoftVectorQuantizer(16, 8), None]
    with torch.no_grad():
        terms[0].centers.copy_(z[:4])
    terms[1], quantizers[1] = copy.deepcopy(terms[0]), copy.deepcopy(quantizers[0])
    for enabled, term, vq in zip((False, True), terms, quantizers, strict=True):
        torch.manual_seed(0)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            term.update_centers(z)
            for _ in range(3):
                vq(z)
    np.testing.assert_allclose(terms[1].centers, terms[0].centers, rtol=1e-6)
    for name, ref in quantizers[0].state_dict().items():
        ours = quantizers[1].state_dict()[name]
        np.testing.assert_allclose(ours.double(), ref.double(), rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_modules_follow_their_float32_twins(dtype):
    """``.half()`` / ``.bfloat16()`` modules store their state in that dtype and compute in
    float32: the centroids and codes agree with a float32 module to the storage
    precision."""
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(300, 4, generator=gen) + torch.tensor([3.0, 0, 0, 0]) * (
        torch.arange(300) % 3)[:, None]
    eps = torch.finfo(dtype).eps
    term = KMeansTerm(3, 4)
    with torch.no_grad():
        term.centers.copy_(z[:3])
    low = copy_module(term).to(dtype)
    term.update_centers(z, n_iter=5)
    low.update_centers(z.to(dtype), n_iter=5)
    assert low.centers.dtype == low.sigma.dtype == dtype
    np.testing.assert_allclose(low.centers.float(), term.centers, rtol=0, atol=20 * eps * 6)
    vq = SoftVectorQuantizer(8, 4, decay=0.9)
    vq(z)  # initializes: both start from the same codes
    low = copy_module(vq).to(dtype)
    for _ in range(5):
        vq(z)
        low(z.to(dtype))
    assert all(b.dtype == dtype for b in (low.codebook, low.ema_sums, low.ema_counts, low.usage))
    np.testing.assert_allclose(low.codebook.float(), vq.codebook, rtol=0, atol=20 * eps * 6)
    np.testing.assert_allclose(low.usage.float(), vq.usage, rtol=20 * eps)


def copy_module(module):
    import copy

    return copy.deepcopy(module)


def test_state_dict_round_trips_continue_training_identically():
    """A module rebuilt from its ``state_dict`` (also through float16 and back) continues
    exactly as the original: every piece of state is in the state dict."""
    gen = torch.Generator().manual_seed(0)
    batches = torch.randn(6, 64, 3, generator=gen, dtype=torch.float64)
    for kwargs in ({"assignment": "hard", "reset_every": 2}, {"assignment": "entmax"}):
        vq = SoftVectorQuantizer(8, 3, dtype=torch.float64, **kwargs)
        for batch in batches[:3]:
            vq(batch)
        clone = SoftVectorQuantizer(8, 3, dtype=torch.float64, **kwargs)
        clone.load_state_dict(vq.state_dict())
        outputs = []
        for module in (vq, clone):
            torch.manual_seed(3)
            outputs.append([module(batch) for batch in batches[3:]])
        for ours, ref in zip(*outputs, strict=True):
            assert all(torch.equal(a, b) for a, b in zip(ours, ref, strict=True))
        for name, value in vq.state_dict().items():
            assert torch.equal(clone.state_dict()[name], value), name
    term = KMeansTerm(3, 3)
    term(batches[0])  # training mode: sets the tied temperature
    half = KMeansTerm(3, 3).half()
    half.load_state_dict(term.state_dict())
    back = KMeansTerm(3, 3, dtype=torch.float64).eval()
    back.load_state_dict(half.state_dict())
    np.testing.assert_allclose(back(batches[1]), term.eval()(batches[1]), rtol=1e-3)


def test_vector_quantizer_state_and_usage():
    vq = SoftVectorQuantizer(8, 2).half()
    assert {"codebook", "ema_counts", "ema_sums", "usage", "steps", "initialized"} <= set(
        vq.state_dict())
    assert vq.codebook.dtype == torch.float16
    out = vq(torch.randn(50, 2, dtype=torch.float16))
    assert out.quantized.dtype == torch.float16 and bool(vq.initialized)
    assert code_usage(torch.tensor([1, 1, 1, 1]), 8) == (1.0, 1)


def test_hard_ema_with_no_decay_is_a_lloyd_step_on_the_batch():
    torch.manual_seed(0)
    z = torch.randn(200, 2, dtype=torch.float64)
    vq = SoftVectorQuantizer(4, 2, assignment="hard", update="ema", decay=0.0,
                             dtype=torch.float64)
    vq(z)  # initializes at random inputs, then one step
    codebook = vq.codebook.clone()
    codes = ((z[:, None] - codebook) ** 2).sum(-1).argmin(1)
    vq(z)
    for j in range(4):
        if (codes == j).any():
            np.testing.assert_allclose(vq.codebook[j], z[codes == j].mean(0), rtol=1e-12)


@pytest.mark.parametrize("update", ["ema", "gradient"])
def test_a_code_that_is_never_nearest_moves_only_under_soft_assignments(update):
    """Every code receives a force in proportion to its responsibility: with softmax the
    code far from the data moves toward it, with hard assignments it stays in place."""
    gen = torch.Generator().manual_seed(0)
    data = 0.3 * torch.randn(400, 4, generator=gen, dtype=torch.float64)
    far = torch.full((4,), 1.5, dtype=torch.float64)
    moved = {}
    for assignment in ("hard", "softmax", "entmax"):
        vq = SoftVectorQuantizer(2, 4, assignment=assignment, update=update, decay=0.5,
                                 relative_sigma=1.0, dtype=torch.float64)
        vq.initialized.fill_(True)
        with torch.no_grad():
            vq.codebook.copy_(torch.stack([data.mean(0), far]))
        optimizer = torch.optim.Adam(vq.parameters(), lr=0.3) if update == "gradient" else None
        for step in range(3):
            out = vq(data)
            assert step > 0 or (out.codes == 0).all()  # the far code is not the nearest
            if optimizer is not None:
                optimizer.zero_grad()
                out.loss.backward()
                optimizer.step()
        moved[assignment] = float((vq.codebook[1].detach() - far).norm())
    assert moved["hard"] == 0.0
    assert moved["softmax"] > 0.5  # most of the way to the data (distance 3)
    assert moved["entmax"] == 0.0  # beyond the support width 4 sigma^2: no force


def test_dead_codes_are_reset_to_inputs():
    gen = torch.Generator().manual_seed(0)
    data = torch.randn(100, 2, generator=gen)
    vq = SoftVectorQuantizer(4, 2, assignment="hard", update="ema", reset_every=2)
    vq.initialized.fill_(True)
    with torch.no_grad():
        vq.codebook.copy_(torch.tensor([[0.0, 0.0], [50.0, 50.0], [60.0, 60.0], [70.0, 70.0]]))
    for _ in range(3):
        vq(data)
    assert code_usage(vq(data).codes, 4)[1] > 1
    assert (vq.codebook.norm(dim=1) < 10).all()


def _two_batches():
    return torch.randn(2, 100, 3, generator=torch.Generator().manual_seed(0),
                       dtype=torch.float64)


def _synced_mask(rank):
    return torch.arange(100) % (rank + 2) > 0


def _synced_process(rank, init_file, out_file):
    """One of two gloo processes: a synced VQ layer and a synced K-Means term, each fed
    its own batch; what they hold is saved for the parent to compare."""
    import os

    import torch.distributed as dist
    from threadpoolctl import threadpool_limits

    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=2)
    try:
        batch = _two_batches()[rank]
        torch.manual_seed(rank)  # different draws on each process: resets must still agree
        vq = SoftVectorQuantizer(5, 3, assignment="softmax", update="ema", sync=True,
                                 decay=0.0, reset_every=2, dtype=torch.float64)
        vq(batch)  # codes at random inputs of rank 0's batch
        saved = {"first": vq.codebook.clone()}
        vq(batch)  # one synced step from the same codes (decay 0: the batch means)
        saved["second"] = vq.codebook.clone()
        vq(batch)  # a reset of the codes without mass, drawn on rank 0
        saved["last"] = vq.codebook.clone()
        cosine = SoftVectorQuantizer(5, 3, cosine=True, sync=True, decay=0.0,
                                     dtype=torch.float64).set_codebook(_two_batches()[0, :5])
        cosine(batch, mask=_synced_mask(rank))  # padding masked on both processes
        saved["masked"] = cosine.codebook.clone()
        term = KMeansTerm(3, 3, sync=True, dtype=torch.float64)
        with threadpool_limits(1):  # no OpenMP team in a forked process
            term.init_centers(batch, n_init=1, random_state=rank)  # rank 0's centroids
        saved["start"] = term.centers.clone()
        term(batch)  # training mode: the tied temperature of both batches
        saved["sigma"] = term.sigma.clone()
        saved["centers"] = term.update_centers(batch, n_iter=2).centers.clone()
        torch.save(saved, f"{out_file}.{rank}")
    finally:
        dist.destroy_process_group()


def test_synced_statistics_agree_across_two_gloo_processes(tmp_path):
    """Two CPU processes on the gloo backend keep one codebook and one set of centroids
    and temperature: those of one process seeing both batches. The processes are forked
    from this one (no second import of torch)."""
    import multiprocessing

    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    out = tmp_path / "state"
    context = multiprocessing.get_context("fork")
    procs = [context.Process(target=_synced_process, args=(rank, tmp_path / "init", out))
             for rank in range(2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
        if proc.exitcode is None:
            proc.kill()
        assert proc.exitcode == 0
    ranks = [torch.load(f"{out}.{rank}") for rank in range(2)]
    for key, value in ranks[0].items():
        assert torch.equal(value, ranks[1][key]), key
    both = _two_batches().reshape(200, 3)
    single = SoftVectorQuantizer(5, 3, assignment="softmax", update="ema", decay=0.0,
                                 dtype=torch.float64)
    single.initialized.fill_(True)
    single.codebook.copy_(ranks[0]["first"])
    single(both)
    np.testing.assert_allclose(ranks[0]["second"], single.codebook, rtol=1e-12)
    cosine = SoftVectorQuantizer(5, 3, cosine=True, decay=0.0, dtype=torch.float64)
    cosine.set_codebook(_two_batches()[0, :5])
    cosine(torch.cat([_two_batches()[r][_synced_mask(r)] for r in range(2)]))
    np.testing.assert_allclose(ranks[0]["masked"], cosine.codebook, rtol=1e-12)
    term = KMeansTerm(3, 3, dtype=torch.float64)
    term.centers.copy_(ranks[0]["start"])
    term(both)
    np.testing.assert_allclose(ranks[0]["sigma"], term.sigma, rtol=1e-13)
    np.testing.assert_allclose(ranks[0]["centers"], term.update_centers(both, n_iter=2).centers,
                               rtol=1e-12)


# ----------------------------------------------------------------------------- issue 35, 38


def test_kmeans_term_on_no_rows_keeps_its_state():
    h = torch.randn(30, 2, generator=torch.Generator().manual_seed(0))
    empty = torch.zeros(0, 2)
    term = KMeansTerm(3, 2, reduction="sum")
    term(h)
    state = {k: v.clone() for k, v in term.state_dict().items()}
    assert term(empty).item() == 0.0
    assert torch.isnan(KMeansTerm(3, 2)(empty))  # mean over no rows
    term.update_centers(empty)
    term.update_sigma(empty)
    for name, value in term.state_dict().items():
        assert torch.equal(value, state[name]), name
    assert torch.isfinite(term.sigma)
    assert term.responsibilities(empty).shape == (0, 3) and term.predict(empty).shape == (0,)
    assert np.isnan(term.critical_ratio(empty)) and np.isnan(critical_ratio(empty, 1.0))


def test_kmeans_term_refuses_a_state_dict_with_another_sigma():
    fixed = KMeansTerm(3, 2, sigma=0.5)
    with pytest.raises(ValueError, match=r"fixed temperature sigma=0.5; the state dict holds "
                                         r"sigma=nan"):
        fixed.load_state_dict(KMeansTerm(3, 2).state_dict())
    with pytest.raises(ValueError, match="sigma=0.3"):
        fixed.load_state_dict(KMeansTerm(3, 2, sigma=0.3).state_dict())
    assert float(fixed.sigma) == 0.5
    fixed.half().load_state_dict(KMeansTerm(3, 2, sigma=0.5).state_dict())
    tied = KMeansTerm(3, 2)
    tied.load_state_dict(KMeansTerm(3, 2, sigma=0.5).state_dict())  # a tied one takes any
    assert float(tied.sigma) == 0.5


def _gaussians(n, dim=8, k=16, seed=0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    means = 4 * torch.randn(k, dim, generator=gen, dtype=dtype)
    return means[torch.randint(k, (n,), generator=gen)] + torch.randn(n, dim, generator=gen,
                                                                      dtype=dtype)


@pytest.mark.parametrize("config", [
    {"assignment": "hard", "update": "ema"}, {"assignment": "softmax", "update": "ema"},
    {"assignment": "entmax", "update": "gradient"}, {"assignment": "hard", "update": "gradient"},
    {"heads": 2, "reset_every": 1}, {"codebook_dim": 3, "cosine": True},
])
def test_a_step_on_no_vectors_changes_no_state(config):
    """An empty batch, first or later, and a batch whose every position is masked: outputs of
    the right empty shape, a zero loss, and every buffer as it was."""
    vq = SoftVectorQuantizer(8, 4, **config)
    heads = config.get("heads", 1)
    codes_shape = (2, 0, heads) if heads > 1 else (2, 0)
    z = _gaussians(64, 4)
    for step in range(3):
        state = {k: v.clone() for k, v in vq.state_dict().items()}
        empty = torch.zeros(2, 0, 4, requires_grad=True)
        out = vq(empty)
        assert out.quantized.shape == (2, 0, 4) and out.codes.shape == codes_shape
        assert out.loss.item() == 0.0
        out.loss.backward()
        masked = vq(z, mask=torch.zeros(64, dtype=torch.bool))
        assert (masked.codes == -1).all() and (masked.quantized == 0).all()
        assert masked.loss.item() == 0.0
        for name, value in vq.state_dict().items():
            assert torch.equal(value, state[name]), (step, name)
        vq(z)  # a real step in between: initializes, then moves the codes
    assert bool(vq.initialized) and int(vq.steps) == 3


def _set_by_hand(vq, codebook):
    with torch.no_grad():
        vq.codebook.copy_(codebook)
    vq.initialized.fill_(True)


def test_the_output_is_exactly_the_code():
    """q + (z - sg(z)): the value is the code, bit for bit, at any scale; the gradient is
    the identity."""
    gen = torch.Generator().manual_seed(0)
    for scale in (1.0, 1e4):
        vq = SoftVectorQuantizer(16, 4, update="gradient")
        _set_by_hand(vq, scale * torch.randn(16, 4, generator=gen))
        z = scale * torch.randn(100, 4, generator=gen)
        for mode in ("train", "eval"):
            vq.train(mode == "train")
            x = z.clone().requires_grad_(True)
            out = vq(x)
            assert torch.equal(out.quantized, vq.codebook.detach()[out.codes]), (scale, mode)
            out.quantized.sum().backward()
            assert torch.equal(x.grad, torch.ones_like(z))
            with torch.no_grad():
                assert torch.equal(vq(z).quantized, vq.codebook[vq(z).codes])


def test_initial_codes_are_distinct_inputs():
    """512 codes from 1,024 rows are 512 distinct rows (with replacement: about 402); 8 codes
    from 8 distinct rows stay 8 distinct codes under softmax updates; with fewer rows than
    codes, the others are rows plus a perturbation of 1e-3 of the root mean square."""
    torch.manual_seed(0)
    z = _gaussians(1024, 64, k=64)
    vq = SoftVectorQuantizer(512, 64, assignment="hard", update="gradient")
    vq(z)
    assert len(torch.unique(vq.codebook.detach(), dim=0)) == 512
    assert torch.isin(vq.codebook.detach(), z).all(1).all()  # every code is an input
    eight = _gaussians(8, 4, k=8)
    vq = SoftVectorQuantizer(8, 4, assignment="softmax", decay=0.9)
    for _ in range(50):
        vq(eight)
    assert len(torch.unique(vq.codebook, dim=0)) == 8
    assert code_usage(vq.eval()(eight).codes, 8)[1] == 8
    three = _gaussians(3, 4)
    vq = SoftVectorQuantizer(8, 4, assignment="hard", update="gradient")
    vq(three)
    codes = vq.codebook.detach()
    nearest = torch.cdist(codes, three).min(1)
    assert len(torch.unique(codes, dim=0)) == 8 and set(nearest.indices.tolist()) == {0, 1, 2}
    rms = float(three.square().mean().sqrt())
    assert (nearest.values == 0).sum() == 3 and nearest.values.max() < 1e-2 * rms


@pytest.mark.parametrize("decay", [0.99, 1.0])
def test_usage_is_bias_corrected_and_resets_read_it(decay):
    """usage = sum_s decay^(t-s) c_s / sum_s decay^(t-s) (the plain mean at decay 1) from
    step 1 on; the reset at step 10 moves exactly the codes averaging below one
    assignment per step (with the cold average, 473 of 512 codes, 98 of them in use);
    a codebook set by hand is not redrawn at step 0."""
    torch.manual_seed(0)
    batches = _gaussians(11 * 1024, 64, k=64).reshape(11, 1024, 64)
    vq = SoftVectorQuantizer(512, 64, assignment="hard", update="gradient", decay=decay,
                             reset_every=10)
    start = batches[0][torch.randperm(1024)[:512]]
    _set_by_hand(vq, start)
    counts = []
    for batch in batches[:10]:
        counts.append(torch.bincount(vq(batch).codes, minlength=512).double())
        assert torch.equal(vq.codebook.detach(), start)  # no reset before step 10
    weights = decay ** torch.arange(9, -1, -1, dtype=torch.float64)
    expected = (weights[:, None] * torch.stack(counts)).sum(0) / weights.sum()
    np.testing.assert_allclose(vq.usage, expected, rtol=1e-5)
    dead = vq.usage < 1  # the float32 average: a code at exactly 1 may round either way
    assert 0 < int(dead.sum()) < 473
    vq(batches[10])
    moved = (vq.codebook.detach() != start).any(1)
    assert torch.equal(moved, dead)


def test_a_codebook_set_mid_training_starts_its_statistics_afresh():
    """Usage after set_codebook is that of the steps since (not a cold average read as
    dead codes at the next reset)."""
    z = _gaussians(256, 8)
    vq = SoftVectorQuantizer(16, 8, assignment="hard", reset_every=2, dead_threshold=1.0)
    for _ in range(20):
        vq(z)
    start = _gaussians(16, 8, seed=1)
    vq.set_codebook(start)
    assert int(vq.steps) == 0 and not vq.usage.any()
    codes = vq(z).codes
    np.testing.assert_allclose(vq.usage, torch.bincount(codes, minlength=16).float())


def test_kmeans_initialization_uses_softkmeans():
    from softkmeans import SoftKMeans

    z = _gaussians(400, 8)
    fitted = SoftKMeans(16, n_init=1, random_state=3).fit(z.double().numpy())
    vq = SoftVectorQuantizer(16, 8).init_codebook(z, random_state=3)
    np.testing.assert_allclose(vq.codebook, fitted.cluster_centers_, rtol=1e-6, atol=1e-6)
    assert bool(vq.initialized)
    auto = SoftVectorQuantizer(16, 8, update="gradient", kmeans_init=True)
    ref = SoftVectorQuantizer(16, 8, update="gradient")
    torch.manual_seed(5)
    auto(z)  # the first training step runs K-Means on its batch
    torch.manual_seed(5)
    ref.init_codebook(z)
    assert torch.equal(auto.codebook, ref.codebook)
    drawn = SoftVectorQuantizer(16, 8, update="gradient")
    drawn(z)
    assert hard_kmeans_loss(z, auto.codebook) < 0.8 * hard_kmeans_loss(z, drawn.codebook)
    with pytest.raises(ValueError, match="needs at least num_codes=16 vectors; got 10"):
        SoftVectorQuantizer(16, 8, kmeans_init=True)(z[:10])
    waiting = SoftVectorQuantizer(16, 8, kmeans_init=True)
    waiting(z, mask=torch.zeros(400, dtype=torch.bool))  # no vectors: no K-Means, no state
    assert not bool(waiting.initialized) and int(waiting.steps) == 0


def test_cosine_codebook_lives_on_the_sphere():
    z = _gaussians(256, 8)
    vq = SoftVectorQuantizer(16, 8, cosine=True, decay=0.5)
    for _ in range(5):
        out = vq(z)
    np.testing.assert_allclose(vq.codebook.norm(dim=1), 1.0, rtol=1e-6)
    vq.eval()
    out = vq(z)
    similarity = torch.nn.functional.normalize(z, dim=1) @ vq.codebook.T
    assert torch.equal(out.codes, similarity.argmax(1))
    np.testing.assert_allclose(out.quantized.norm(dim=1), 1.0, rtol=1e-6)


def test_heads_share_the_codebook_and_projections_map_to_it():
    z = _gaussians(50, 6)
    vq = SoftVectorQuantizer(8, 6, heads=2).eval()
    assert vq.codebook.shape == (8, 3) and isinstance(vq.project_in, torch.nn.Identity)
    out = vq(z.reshape(5, 10, 6))
    assert out.codes.shape == (5, 10, 2)
    half = ((z.reshape(100, 3)[:, None] - vq.codebook) ** 2).sum(-1).argmin(1)
    assert torch.equal(out.codes.reshape(-1), half)
    assert torch.equal(vq.get_output_from_indices(out.codes), out.quantized)
    projected = SoftVectorQuantizer(8, 6, codebook_dim=2, heads=2)
    assert projected.codebook.shape == (8, 2)
    assert [n for n, _ in projected.named_parameters()] == [
        "project_in.weight", "project_in.bias", "project_out.weight", "project_out.bias"]
    x = z.clone().requires_grad_(True)
    out = projected(x)
    (out.quantized.sum() + out.loss).backward()
    assert projected.project_in.weight.grad.abs().sum() > 0 and x.grad.abs().sum() > 0
    projected.eval()
    with torch.no_grad():
        out = projected(z)
        inner = projected.project_in(z).reshape(100, 2)
        codes = ((inner[:, None] - projected.codebook) ** 2).sum(-1).argmin(1)
        assert torch.equal(out.codes.reshape(-1), codes)
        assert torch.equal(out.quantized, projected.get_output_from_indices(out.codes))
        assert torch.equal(projected.get_codes_from_indices(out.codes),
                           projected.codebook[codes].reshape(50, 4))
    decoded = vq.get_codes_from_indices(torch.tensor([[1, -1]]))
    assert torch.equal(decoded, torch.cat([vq.codebook[1], torch.zeros(3)])[None])


def test_masked_positions_take_no_part():
    """Padding (NaN here) changes nothing: the state and the loss are those of the batch
    without it; the padded outputs are 0 and their codes -1."""
    torch.manual_seed(0)
    z = _gaussians(60, 4)
    padded = torch.cat([z, torch.full((20, 4), float("nan"))]).reshape(8, 10, 4)
    mask = torch.arange(80).reshape(8, 10) < 60
    start = _gaussians(8, 4, seed=1)
    ours, ref = (SoftVectorQuantizer(8, 4, reset_every=2, dtype=torch.float64).set_codebook(
        start) for _ in range(2))
    for _ in range(3):
        torch.manual_seed(1)
        out = ours(padded.double(), mask=mask)
        torch.manual_seed(1)
        want = ref(z.double())
        assert torch.equal(out.codes[mask], want.codes) and (out.codes[~mask] == -1).all()
        assert (out.quantized[~mask] == 0).all() and torch.isclose(out.loss, want.loss)
    for name, value in ref.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[name], value, rtol=1e-12, err_msg=name)
    x = padded.double().requires_grad_(True)
    out = ours(x, mask=mask)
    (out.quantized.sum() + out.loss).backward()
    assert (x.grad[~mask] == 0).all() and torch.isfinite(x.grad[mask]).all()


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"decay": 1.5}, r"decay must lie in \[0, 1\]"),
    ({"dead_threshold": -1}, "dead_threshold must be"),
    ({"heads": 3}, r"dim \(4\) must be a multiple of heads \(3\)"),
    ({"codebook_dim": 0}, "codebook_dim must be a positive integer"),
])
def test_vector_quantizer_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SoftVectorQuantizer(8, 4, **kwargs)


def test_vector_quantizer_bad_masks_and_codebooks_are_named():
    vq = SoftVectorQuantizer(8, 4)
    z = torch.randn(3, 5, 4)
    with pytest.raises(TypeError, match="mask must be a boolean tensor; got torch.float32"):
        vq(z, mask=torch.ones(3, 5))
    with pytest.raises(ValueError, match=r"mask must have shape \(3, 5\)"):
        vq(z, mask=torch.ones(15, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"codebook must have shape \(8, 4\)"):
        vq.set_codebook(torch.zeros(8, 3))
    with pytest.raises(TypeError, match="z must be a torch tensor; got ndarray"):
        vq(np.zeros((3, 4)))



def test_vq_comparison_script_runs_at_a_tiny_size():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "vq_compare.py"
    spec = importlib.util.spec_from_file_location("vq_compare", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    args = script.parse(["--codes", "8", "--dim", "4", "--gaussians", "3", "--steps", "3",
                         "--batch", "32", "--held-out", "64", "--seeds", "2"])
    results = [script.run_seed(seed, args) for seed in range(2)]
    names = list(results[0])
    assert names[-len(script.OURS):] == list(script.OURS)
    assert len(names) == len(script.OURS) + (importlib.util.find_spec(
        "vector_quantize_pytorch") is not None)
    for seed in results:
        assert seed[names[0]]["ratio"] == 1.0
        for name, row in seed.items():
            assert 1 <= row["used"] <= 8 and 1 <= row["perplexity"] <= 8, name
            assert 0 < row["mse"] < 1 and row["ms"] > 0, name
    lines = script.table(results, args).splitlines()
    assert len(lines) == 4 + len(names) and all(line == line.rstrip() for line in lines)


# ----------------------------------------------------------------------------- documentation


@pytest.mark.parametrize("module_name", ["softkmeans.torch._functional",
                                         "softkmeans.torch._modules"])
def test_examples_in_docstrings_run(module_name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module_name),
                             optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


def test_public_names_have_an_examples_section():
    import softkmeans.torch as skt

    for name in skt.__all__:
        doc = getattr(skt, name).__doc__
        assert doc and "Examples\n    --------" in doc, name


def test_the_code_of_the_user_guide_runs(capsys):
    import re
    from pathlib import Path

    page = Path(__file__).resolve().parents[1] / "doc" / "torch.rst"
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", page.read_text())
    assert len(blocks) == 3
    namespaces = [{} for _ in blocks]  # each block runs on its own, imports included
    for block, namespace in zip(blocks, namespaces, strict=True):
        exec(compile("\n".join(line[3:] for line in block.splitlines()), str(page), "exec"),
             namespace)
    assert namespaces[0]["labels"].shape == (512,)
    assert namespaces[1]["quantized"].shape == (32, 8, 8, 64)
    assert namespaces[2]["decoded"].shape == (16, 50, 96)
    printed = capsys.readouterr().out.split()
    assert len(printed) == 6 and all(float(r) > 1 for r in printed[1::2])


# ----------------------------------------------------------------------------- reproduction


def test_jacobian_norm_without_cancellation():
    from softkmeans.experiments.gradients import jacobian_norms

    r = torch.tensor([[1 - 2e-30, 1e-30, 1e-30], [0.2, 0.3, 0.5]], dtype=torch.float64)
    labels = torch.tensor([0, 2])
    direct = torch.stack([(torch.diag(row) - torch.outer(row, row)).norm() for row in r])
    ours = jacobian_norms(r, labels)
    np.testing.assert_allclose(ours[1], direct[1], rtol=1e-14)
    # diagonal 2e-30, 1e-30, 1e-30 and four off-diagonal 1e-30 to first order: 10e-60,
    # where the direct formula (1 - 2e-30 rounds to 1) gives 0
    np.testing.assert_allclose(ours[0], np.sqrt(10e-60), rtol=1e-12)


def test_section_8_2_claims_on_small_data(tmp_path):
    from softkmeans.experiments import Config, run

    config = Config.quick(n_init=2, datasets=("separation_8", "iris"))
    text = run(out=tmp_path, config=config, families=("gradients",), progress=False).read_text()
    assert "## 8.2 Gradients at low temperature" in text
    lines = [line for line in text.splitlines() if line.startswith("| 8.2 |")]
    assert len(lines) == 6
    # the median norm ratio (line 5) depends on the datasets; the others on the theory
    assert all("| yes" in line for i, line in enumerate(lines) if i != 4), lines
    assert (tmp_path / "records" / "gradients.csv").exists()
    assert (tmp_path / "gradients.png").stat().st_size > 0


def test_section_8_2_says_why_it_is_skipped_without_torch(tmp_path, monkeypatch):
    import importlib.util

    from softkmeans.experiments import Config, run

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))
    config = Config.quick(n_init=1, datasets=("separation_8",))
    text = run(out=tmp_path, config=config, families=("gradients",), progress=False).read_text()
    assert "skipped: PyTorch is not installed" in text


def test_section_8_3_helpers_and_skip_line(tmp_path):
    from softkmeans.experiments import Config, run
    from softkmeans.experiments.deep import clustering_accuracy, distinct_centroids

    assert clustering_accuracy([0, 0, 1, 1, 2], [2, 2, 0, 0, 0]) == pytest.approx(0.8)
    centers = np.array([[0.0, 0.0], [0.001, 0.0], [5.0, 5.0], [5.0, 5.004], [9.0, 0.0]])
    assert distinct_centroids(centers, scale=1.0) == 3
    config = Config.quick(n_init=1, datasets=("separation_8",))
    text = run(out=tmp_path, config=config, families=("deep",), progress=False).read_text()
    assert "skipped: it runs on the digits dataset" in text


def test_section_8_4_skip_line(tmp_path):
    from softkmeans.experiments import Config, run

    config = Config.quick(n_init=1, datasets=("separation_8",))
    text = run(out=tmp_path, config=config, families=("codebook",), progress=False).read_text()
    assert "| 8.4 | Sec. 8.4 codebook claims | - | skipped: it runs on the digits" in text
