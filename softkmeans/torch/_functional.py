"""The K-Means terms as differentiable functions of representations and centroids.

Notation: representations ``h`` (n x d), centroids ``mu`` (k x d), squared
distances ``d_ij = ||h_i - mu_j||^2``, temperature ``sigma`` and entropic weight
``tau = 2 sigma^2``. Every row is shifted by its smallest distance ``dmin_i``
before anything is exponentiated, so the values stay finite and exact in the
hard limit for any positive ``tau``, and equal the hard ones when ``tau``
underflows to zero.

The reduced objectives are minima over the responsibilities of
``sum_j r_ij d_ij - tau H(r_i)``. By the envelope theorem their derivative
with respect to ``d_ij`` is ``r_ij`` and with respect to ``tau`` is ``-H(r_i)``:
the backward and forward-mode (``jvp``) passes below use these closed forms, with
no derivative of ``r``. Where a backward pass is itself differentiated (double
backward, ``torch.func.hessian``, forward mode over reverse mode), it
recomputes ``r`` as a differentiable function of the inputs.
"""

import contextlib
import math

import torch
from torch.autograd import forward_ad

__all__ = [
    "kmeans_loss",
    "entmax_kmeans_loss",
    "expected_distortion",
    "hard_kmeans_loss",
    "responsibilities",
    "entmax",
    "tied_sigma",
    "critical_ratio",
]

_REDUCTIONS = ("mean", "sum", "none")


# ----------------------------------------------------------------------------- helpers


def _compute_dtype(*tensors):
    """float32 or better: half-precision inputs are promoted before any distance."""
    dtype = torch.float32
    for tensor in tensors:
        dtype = torch.promote_types(dtype, tensor.dtype)
    return dtype


def _autocast_off(tensor):
    """A context without autocast on ``tensor``'s device: products stay in the inputs' dtype."""
    device_type = tensor.device.type
    if torch.amp.is_autocast_available(device_type) and torch.is_autocast_enabled(device_type):
        return torch.autocast(device_type=device_type, enabled=False)
    return contextlib.nullcontext()


def _sq_distances(h, mu):
    """``||h_i - mu_j||^2`` in the inputs' dtype, outside autocast, clipped at 0."""
    with _autocast_off(h):
        return _expanded_distances(h, mu)


def _expanded_distances(h, mu):
    cross = h @ mu.T
    d = (h * h).sum(1, keepdim=True) - 2.0 * cross + (mu * mu).sum(1)[None, :]
    return d.clamp_min(0.0)


def _can_sync(tensor):
    """Whether a value of ``tensor`` may be read back to the host: not while compiling
    or under torch.func."""
    if torch.compiler.is_compiling():
        return False
    return not torch._C._functorch.is_functorch_wrapped_tensor(tensor)


def _check_sigma(sigma):
    """A positive finite temperature, float or scalar tensor. A tensor's value is checked
    by one host sync, skipped while compiling or under torch.func (see :func:`kmeans_loss`)."""
    if isinstance(sigma, torch.Tensor):
        if sigma.numel() != 1:
            raise ValueError(f"sigma must be a scalar; got a tensor of shape {tuple(sigma.shape)}.")
        sigma = sigma.reshape(())
        if _can_sync(sigma) and not bool((sigma > 0) & torch.isfinite(sigma)):
            raise ValueError(f"sigma must be a positive finite number; got {float(sigma)!r}.")
        return sigma
    value = float(sigma)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"sigma must be a positive finite number; got {sigma!r}.")
    return value


def _check_alpha(alpha):
    value = float(alpha)
    if not (value > 1 and math.isfinite(value)):
        raise ValueError(f"alpha must be a finite number greater than 1; got {alpha!r}.")
    return value


def _prepare(h, centers, sigma=None):
    """Flatten ``h`` to rows, promote both to the compute dtype, make ``tau`` a tensor
    (``sigma`` already checked, or computed by a module)."""
    if not isinstance(h, torch.Tensor) or not isinstance(centers, torch.Tensor):
        raise TypeError("h and centers must be torch tensors; got "
                        f"{type(h).__name__} and {type(centers).__name__}.")
    if centers.dim() != 2 or centers.shape[0] < 1:
        raise ValueError("centers must have shape (n_clusters, dim) with n_clusters >= 1; got "
                         f"{tuple(centers.shape)}.")
    if h.dim() < 1 or h.shape[-1] != centers.shape[1]:
        raise ValueError(f"h must have shape (..., {centers.shape[1]}) to match centers of shape "
                         f"{tuple(centers.shape)}; got {tuple(h.shape)}.")
    dtype = _compute_dtype(h, centers)
    rows = h.reshape(-1, h.shape[-1]).to(dtype)
    mu = centers.to(device=rows.device, dtype=dtype)
    if sigma is None:
        return rows, mu, None
    sigma = torch.as_tensor(sigma, dtype=dtype, device=rows.device).reshape(())
    return rows, mu, 2.0 * sigma * sigma


def _reduce(values, reduction, batch_shape, weight):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}; got {reduction!r}.")
    if weight is not None:
        weight = weight.reshape(-1).to(values)
        if weight.shape != values.shape:
            raise ValueError(f"weight must have one entry per row of h ({values.shape[0]}); "
                             f"got {weight.numel()}.")
        values = values * weight
    if reduction == "none":
        return values.reshape(batch_shape)
    total = values.sum()
    if reduction == "sum":
        return total
    return total / (values.shape[0] if weight is None else weight.sum())


# ----------------------------------------------------------------------------- entmax


def _scaled_scores(z, alpha):
    """``(alpha - 1) (z - max z)``, clipped below at -2: a value at or below -1 is never
    in the support (the threshold is at least ``max - 1``), so clipping changes nothing
    and keeps every later power finite. A NaN score stays NaN (its row becomes NaN)."""
    top = z.max(dim=-1, keepdim=True).values
    diff = top - z
    u = torch.where(diff > 0, -(alpha - 1.0) * diff, torch.where(torch.isnan(z), z, 0.0))
    return u.clamp_min(-2.0)


def _threshold_sorted(u, alpha, prune):
    """Exact threshold for alpha = 1.5 (``p = [u - t]_+^2``) or 2 (sparsemax) by sorting.

    With ``prune``, only the entries above -1 (the only ones that can carry mass)
    are sorted: ``topk`` over the largest such count among the rows instead of a
    full sort.
    """
    k = u.shape[-1]
    m = k
    if prune and k > 2:
        m = max(int((u > -1.0).sum(-1).max()), 1)
    srt = torch.topk(u, m, dim=-1).values if m < k else torch.sort(u, -1, descending=True).values
    counts = torch.arange(1, m + 1, dtype=u.dtype, device=u.device)
    csum = srt.cumsum(-1)
    if alpha == 1.5:
        mean = csum / counts
        mean_sq = (srt * srt).cumsum(-1) / counts
        delta = (1.0 - counts * (mean_sq - mean * mean)) / counts
        cand = mean - delta.clamp_min(0.0).sqrt()
        support = (cand <= srt).sum(-1, keepdim=True)
    else:
        cand = (csum - 1.0) / counts
        support = (cand < srt).sum(-1, keepdim=True)
    return cand.gather(-1, support.clamp_min(1) - 1)


def _threshold_bisection(u, alpha):
    """Threshold for any alpha by bisection, to the resolution of the dtype."""
    exponent = 1.0 / (alpha - 1.0)
    k = u.shape[-1]
    lo = torch.full_like(u[..., :1], -1.0)
    hi = torch.full_like(u[..., :1], -((1.0 / k) ** (alpha - 1.0)))
    for _ in range(60 if u.dtype == torch.float64 else 30):
        mid = 0.5 * (lo + hi)
        mass = (u - mid).clamp_min(0.0).pow(exponent).sum(-1, keepdim=True)
        above = mass >= 1.0
        lo = torch.where(above, mid, lo)
        hi = torch.where(above, hi, mid)
    return lo


def _entmax_rows(z, alpha, prune):
    """Entmax-alpha of the last dimension of ``z``: exact zeros, rows summing to 1; a row
    with a NaN is NaN, an empty ``z`` gives an empty result."""
    if z.numel() == 0:
        return torch.zeros_like(z)
    u = _scaled_scores(z, alpha)
    if alpha in (1.5, 2.0):
        t = _threshold_sorted(u, alpha, prune and _can_sync(u))
    else:
        t = _threshold_bisection(u, alpha)
    p = (u - t).clamp_min(0.0)
    if alpha == 1.5:
        p = p * p
    elif alpha != 2.0:
        p = p.pow(1.0 / (alpha - 1.0))
    return p / p.sum(-1, keepdim=True)


def _entmax_jacobian_product(p, alpha, v):
    """``J v`` for the Jacobian ``J = diag(s) - s s^T / sum(s)`` of entmax at ``p``, with
    ``s = p^(2 - alpha)`` on the support (Peters et al. 2019); ``J`` is symmetric, so this
    is also ``v^T J``."""
    support = p > 0
    s = torch.where(support, torch.where(support, p, 1.0).pow(2.0 - alpha), 0.0)
    vs = v * s
    return vs - s * (vs.sum(-1, keepdim=True) / s.sum(-1, keepdim=True))


def _with_forward_mode(function):
    """Give the autograd Function ``function`` a subclass ``function.forward_mode`` whose
    ``jvp`` is ``function.tangent``, with the tensors of ``function.saved`` kept for it.

    Dynamo does not trace a Function that defines ``jvp`` (torch 2.13: "Unsupported
    custom jvp"), so :func:`_apply` runs ``function`` itself under ``torch.compile``
    and the subclass otherwise.
    """

    def setup_context(ctx, inputs, output):
        function.setup_context(ctx, inputs, output)
        ctx.save_for_forward(*function.saved(inputs, output))

    function.forward_mode = type(f"{function.__name__}ForwardMode", (function,), {
        "setup_context": staticmethod(setup_context), "jvp": staticmethod(function.tangent)})
    return function


def _apply(function, *args):
    """``function.apply(*args)``, with forward-mode AD except while Dynamo traces."""
    if torch.compiler.is_compiling():
        return function.apply(*args)
    return function.forward_mode.apply(*args)


@_with_forward_mode
class _Entmax(torch.autograd.Function):
    """Entmax with its closed-form Jacobian in both the backward and the forward mode."""

    generate_vmap_rule = True

    @staticmethod
    def forward(z, alpha, prune):
        return _entmax_rows(z, alpha, prune)

    @staticmethod
    def saved(inputs, output):
        return (output,)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.alpha = inputs[1]
        ctx.save_for_backward(*_Entmax.saved(inputs, output))

    @staticmethod
    def backward(ctx, grad):
        (p,) = ctx.saved_tensors
        return _entmax_jacobian_product(p, ctx.alpha, grad), None, None

    @staticmethod
    def tangent(ctx, tangent, _alpha, _prune):
        (p,) = ctx.saved_tensors
        return _entmax_jacobian_product(p, ctx.alpha, tangent)


def entmax(scores, alpha=1.5, dim=-1):
    """Entmax-alpha of ``scores`` along ``dim``, differentiable, with exact zeros.

    ``p_j = [(alpha - 1) z_j - t]_+^(1 / (alpha - 1))`` with the threshold ``t``
    that makes ``p`` sum to one; alpha = 1.5 and 2 (sparsemax) are exact by
    sorting, other orders use bisection to the dtype's resolution. Only the
    entries within 1 of the largest scaled score can carry mass, so the sort is
    restricted to them. The backward and forward-mode passes use the closed-form
    Jacobian. A slice with a NaN is NaN (as with :func:`torch.softmax`); empty
    scores give an empty result.

    Parameters
    ----------
    scores : Tensor
        Logits ``z``.
    alpha : float, default=1.5
        Order, greater than 1 (alpha -> 1 is softmax).
    dim : int, default=-1
        Dimension that sums to one.

    Returns
    -------
    Tensor
        Same shape and dtype as ``scores`` (float32 or better).

    Examples
    --------
    >>> import torch
    >>> from softkmeans.torch import entmax
    >>> [round(p, 4) for p in entmax(torch.tensor([0.0, -1.0, -5.0])).tolist()]
    [0.8307, 0.1693, 0.0]
    """
    alpha = _check_alpha(alpha)
    z = scores.to(_compute_dtype(scores)).movedim(dim, -1)
    return _apply(_Entmax, z, alpha, True).movedim(-1, dim)


# ----------------------------------------------------------------------------- reduced objectives


def _shifted(d, tau):
    """``dmin``, nearest labels and ``d - dmin`` of every row."""
    dmin, labels = d.min(dim=1, keepdim=True)
    return dmin, labels, d - dmin


def _logits(diff, tau):
    """``-(d - dmin) / tau``: 0 at the nearest centroid, never NaN, hard when ``tau``
    underflows (it is clipped at the dtype's smallest normal number)."""
    return -diff / tau.clamp_min(torch.finfo(diff.dtype).tiny)


def _softmax_rows(d, tau):
    """Per-row ``F_sigma`` and softmax responsibilities, via ``tau log1p(S_i)``."""
    dmin, labels, diff = _shifted(d, tau)
    w = torch.exp(_logits(diff, tau))
    others = w.scatter(1, labels, 0.0)
    spread = others.sum(1, keepdim=True)
    resp = others.scatter(1, labels, 1.0) / (1.0 + spread)
    return (dmin - tau * torch.log1p(spread)).squeeze(1), resp


def _entmax_objective_rows(d, tau, alpha, prune):
    """Per-row ``sum_j r_ij d_ij - tau H_alpha(r_i)`` at the entmax responsibilities."""
    dmin, _, diff = _shifted(d, tau)
    resp = _entmax_rows(_logits(diff, tau), alpha, prune)
    entropy = (1.0 - resp.pow(alpha).sum(1)) / (alpha * (alpha - 1.0))
    gap = tau * entropy - (resp * diff).sum(1)
    return dmin.squeeze(1) - gap, resp


def _entropy(resp, alpha):
    if alpha is None:
        return -torch.special.xlogy(resp, resp).sum(1)
    return (1.0 - resp.pow(alpha).sum(1)) / (alpha * (alpha - 1.0))


def _resp_from_distances(d, tau, alpha, prune):
    """Softmax (``alpha`` None) or entmax responsibilities of the distances ``d``,
    differentiable."""
    z = _logits(_shifted(d, tau)[2], tau)
    if alpha is None:
        return torch.softmax(z, dim=1)
    return _apply(_Entmax, z, alpha, prune)


def _differentiated(*tensors):
    """Whether the pass running now is itself differentiated: by reverse mode (grad mode
    is on in a backward pass only with ``create_graph``, or under ``torch.func``) or by
    forward mode (the tensors carry tangents)."""
    if torch.is_grad_enabled():
        return True
    return any(forward_ad.unpack_dual(t).tangent is not None for t in tensors)


def _pullback(weights, row_sums, h, mu, needs_h=True, needs_mu=True):
    """Gradients from ``w_ij = dL/dd_ij`` through ``d_ij = ||h_i - mu_j||^2``:
    ``2 (s_i h_i - sum_j w_ij mu_j)`` and ``2 (sum_i w_ij mu_j - sum_i w_ij h_i)``,
    ``s_i = sum_j w_ij`` given as ``row_sums``."""
    grad_h = grad_mu = None
    with _autocast_off(h):
        if needs_h:
            grad_h = 2.0 * (row_sums * h - weights @ mu)
        if needs_mu:
            grad_mu = 2.0 * (weights.sum(0)[:, None] * mu - weights.T @ h)
    return grad_h, grad_mu


def _pushforward(weights, h, mu, dh, dmu):
    """``sum_j w_ij dd_ij`` for tangents ``dh`` and ``dmu`` (None: zero) of the inputs of
    ``d_ij = ||h_i - mu_j||^2``: the transpose of :func:`_pullback`."""
    out = torch.zeros_like(h[:, 0])
    with _autocast_off(h):
        if dh is not None:
            grad_h, _ = _pullback(weights, weights.sum(1, keepdim=True), h, mu, needs_mu=False)
            out = out + (grad_h * dh).sum(1)
        if dmu is not None:
            out = out + 2.0 * (weights @ (mu * dmu).sum(1) - (h * (weights @ dmu)).sum(1))
    return out


@_with_forward_mode
class _ReducedObjective(torch.autograd.Function):
    """Per-row reduced objective (softmax when ``alpha`` is None, Tsallis otherwise).

    ``dF_i = sum_j r_ij dd_ij - H(r_i) dtau``: backward
    ``dF_i/dh_i = 2 (h_i - sum_j r_ij mu_j)``, ``dF_i/dmu_j = 2 r_ij (mu_j - h_i)``,
    ``dF_i/dtau = -H(r_i)``, and the forward mode is the same form applied to tangents.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(h, mu, tau, alpha, prune):
        with torch.no_grad():
            d = _sq_distances(h, mu)
            if alpha is None:
                return _softmax_rows(d, tau)
            return _entmax_objective_rows(d, tau, alpha, prune)

    @staticmethod
    def saved(inputs, output):
        return (*inputs[:3], output[1])

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.alpha = inputs[3]
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(*_ReducedObjective.saved(inputs, output))

    @staticmethod
    def backward(ctx, grad, _grad_resp):
        h, mu, tau, resp = ctx.saved_tensors
        if _differentiated(h, mu, tau):  # the gradient must depend on the inputs through r
            resp = _resp_from_distances(_sq_distances(h, mu), tau, ctx.alpha, False)
        needs_h, needs_mu, needs_tau = ctx.needs_input_grad[:3]
        grad_h, grad_mu = _pullback(grad[:, None] * resp, grad[:, None], h, mu, needs_h,
                                    needs_mu)
        grad_tau = -(grad * _entropy(resp, ctx.alpha)).sum() if needs_tau else None
        return grad_h, grad_mu, grad_tau, None, None

    @staticmethod
    def tangent(ctx, dh, dmu, dtau, _alpha, _prune):
        h, mu, tau, resp = ctx.saved_tensors
        tangent = _pushforward(resp, h, mu, dh, dmu)
        if dtau is not None:
            tangent = tangent - _entropy(resp, ctx.alpha) * dtau
        return tangent, None


def _expected_distortion_rows(d, tau):
    """``sum_j r_ij d_ij`` and its derivatives ``c_ij = dD_i/dd_ij`` and ``dD_i/dtau``.

    ``c_ij = r_ij (1 - e_ij / tau)`` and ``dD_i/dtau = sum_j r_ij e_ij^2 / tau^2`` with
    ``e_ij = d_ij - sum_l r_il d_il``, evaluated from the shifted distances so that a
    saturated row keeps the exponentially small deviations instead of rounding them
    away in a difference of nearly equal numbers.
    """
    dmin, labels, diff = _shifted(d, tau)
    _, resp = _softmax_rows(d, tau)
    spread = (resp * diff).sum(1, keepdim=True)
    excess = diff - spread
    coef = resp - resp * excess / tau
    return (dmin + spread).squeeze(1), resp, coef, (resp * excess * excess).sum(1) / (tau * tau)


@_with_forward_mode
class _ExpectedDistortion(torch.autograd.Function):
    """``D_sigma`` per row, with the derivative through the softmax in closed form."""

    generate_vmap_rule = True

    @staticmethod
    def forward(h, mu, tau):
        with torch.no_grad():
            values, resp, _, _ = _expected_distortion_rows(_sq_distances(h, mu), tau)
        return values, resp

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(*_ExpectedDistortion.saved(inputs, output))

    @staticmethod
    def saved(inputs, output):
        return inputs

    @staticmethod
    def backward(ctx, grad, _grad_resp):
        # differentiable torch operations: also the backward's own derivative
        h, mu, tau = ctx.saved_tensors
        _, _, coef, dtau = _expected_distortion_rows(_sq_distances(h, mu), tau)
        weighted = grad[:, None] * coef
        grad_h, grad_mu = _pullback(weighted, weighted.sum(1, keepdim=True), h, mu)
        return grad_h, grad_mu, (grad * dtau).sum()

    @staticmethod
    def tangent(ctx, dh, dmu, dtau):
        h, mu, tau = ctx.saved_tensors
        _, _, coef, dd_dtau = _expected_distortion_rows(_sq_distances(h, mu), tau)
        tangent = _pushforward(coef, h, mu, dh, dmu)
        return (tangent if dtau is None else tangent + dd_dtau * dtau), None



def _fill_doc(function):
    """Put the shared parameter descriptions into ``function``'s docstring."""
    function.__doc__ = function.__doc__.replace("    {shapes}", _SHAPES).replace(
        "{reduction}", _REDUCTION).replace("{sigma}", _SIGMA)
    return function


_SHAPES = """
    Parameters
    ----------
    h : Tensor of shape (..., dim)
        Representations; every leading dimension is a batch dimension.
    centers : Tensor of shape (n_clusters, dim)
        Centroids."""

_REDUCTION = """
    reduction : {"mean", "sum", "none"}, default="mean"
        ``"sum"`` is the objective over the batch as the paper writes it,
        ``"mean"`` divides it by the number of rows (or the sum of the weights), so
        that its weight in a loss does not depend on the batch size; ``"none"``
        returns one value per row, of shape ``h.shape[:-1]``. On no rows the sum is
        0 and the mean NaN (0 / 0, as for torch's losses).
    weight : Tensor of shape h.shape[:-1], default=None
        Sample weights."""

_SIGMA = """
        A tensor is checked to be positive and finite eagerly (one host sync); not
        while compiling or under torch.func, where 0 gives the hard limit, a
        negative value acts as its absolute value, inf gives uniform
        responsibilities (and losses of -inf) and NaN gives NaN."""


@_fill_doc
def kmeans_loss(h, centers, sigma, *, reduction="mean", weight=None):
    """Softmax-relaxed K-Means objective ``F_sigma``: a soft minimum of the distances.

    ``F_sigma = -2 sigma^2 sum_i log sum_j exp(-||h_i - mu_j||^2 / (2 sigma^2))``.
    It lies below the hard distortion ``J`` by at most ``2 n sigma^2 log k`` and
    tends to it as ``sigma -> 0``. Its gradients are responsibility-weighted
    forces, ``2 (h_i - sum_j r_ij mu_j)`` for a representation and
    ``2 sum_i r_ij (mu_j - h_i)`` for a centroid, with ``r`` the softmax
    responsibilities: they tend to the gradients of ``J`` at low temperature
    instead of vanishing. The backward pass evaluates these forms directly.
    Computed in float32 or better, also under autocast.
    {shapes}
    sigma : float or Tensor
        Temperature; a scalar tensor that requires grad receives
        ``dF/dsigma = -4 sigma sum_i H(r_i)`` (Shannon entropy H).{sigma}{reduction}

    Returns
    -------
    Tensor
        A scalar, or one value per row with ``reduction="none"``.

    See Also
    --------
    entmax_kmeans_loss : The Tsallis (entmax) form, equal to ``J`` at a finite temperature.
    expected_distortion : ``sum_j r_ij d_ij`` with ``r`` differentiated through: another loss.

    Examples
    --------
    >>> import torch
    >>> from softkmeans.torch import kmeans_loss
    >>> h = torch.tensor([[0.0, 0.0], [3.0, 0.0]], requires_grad=True)
    >>> centers = torch.tensor([[0.5, 0.0], [3.0, 1.0]])
    >>> loss = kmeans_loss(h, centers, sigma=0.1, reduction="sum")
    >>> round(loss.item(), 4)  # the hard distortion 0.25 + 1
    1.25
    >>> loss.backward()
    >>> h.grad.tolist()  # 2 (h_i - mu_j): toward the nearest centroid
    [[-1.0, 0.0], [0.0, -2.0]]
    """
    return _objective(h, centers, _check_sigma(sigma), None, reduction, weight)


@_fill_doc
def entmax_kmeans_loss(h, centers, sigma, alpha=1.5, *, reduction="mean", weight=None):
    """Tsallis-relaxed K-Means objective ``F^(alpha)_sigma`` at the entmax responsibilities.

    Row ``i`` contributes ``sum_j r_ij d_ij - 2 sigma^2 H_alpha(r_i)``, with
    ``r_i = entmax_alpha(-d_i / (2 sigma^2))`` and the Tsallis entropy
    ``H_alpha(p) = (1 - sum_j p_j^alpha) / (alpha (alpha - 1))``. The row equals its
    hard distortion exactly once its margin (second smallest minus smallest
    distance) reaches ``2 sigma^2 / (alpha - 1)``, ``4 sigma^2`` at alpha = 1.5, and
    ``F_sigma < F^(3/2)_sigma <= J``. Gradients are the forces of
    :func:`kmeans_loss` with the entmax responsibilities.
    {shapes}
    sigma : float or Tensor
        Temperature; a scalar tensor that requires grad receives
        ``-4 sigma sum_i H_alpha(r_i)``.{sigma}
    alpha : float, default=1.5
        Entmax order, greater than 1; 1.5 and 2 are exact by sorting, other orders
        use bisection.{reduction}

    Returns
    -------
    Tensor

    Examples
    --------
    >>> import torch
    >>> from softkmeans.torch import entmax_kmeans_loss
    >>> h = torch.tensor([[0.0, 0.0], [3.0, 0.0]])
    >>> centers = torch.tensor([[0.5, 0.0], [3.0, 1.0]])
    >>> entmax_kmeans_loss(h, centers, sigma=0.5, reduction="sum").item()  # margins >= 4 sigma^2
    1.25
    """
    return _objective(h, centers, _check_sigma(sigma), _check_alpha(alpha), reduction, weight)


def _objective(h, centers, sigma, alpha, reduction="mean", weight=None):
    """:func:`kmeans_loss` (``alpha`` None) or :func:`entmax_kmeans_loss` at a checked
    ``sigma``."""
    rows, mu, tau = _prepare(h, centers, sigma)
    values, _ = _apply(_ReducedObjective, rows, mu, tau, alpha, True)
    return _reduce(values, reduction, h.shape[:-1], weight)


@_fill_doc
def hard_kmeans_loss(h, centers, *, reduction="mean", weight=None):
    """Hard K-Means distortion ``J = sum_i min_j ||h_i - mu_j||^2``.

    Its gradient moves each representation toward its nearest centroid only; it
    is the zero-temperature limit of :func:`kmeans_loss`.
    {shapes}{reduction}

    Returns
    -------
    Tensor

    Examples
    --------
    >>> import torch
    >>> from softkmeans.torch import hard_kmeans_loss
    >>> hard_kmeans_loss(torch.tensor([[0.0], [3.0]]), torch.tensor([[0.5], [2.0]])).item()
    0.625
    """
    rows, mu, _ = _prepare(h, centers)
    with torch.no_grad():
        labels = _sq_distances(rows, mu).argmin(1)
    values = ((rows - mu[labels]) ** 2).sum(1)
    return _reduce(values, reduction, h.shape[:-1], weight)


@_fill_doc
def expected_distortion(h, centers, sigma, *, reduction="mean", weight=None):
    """Expected distortion ``D_sigma = sum_ij r_ij ||h_i - mu_j||^2``, r differentiated through.

    Not a reduced objective: its gradient is that of :func:`kmeans_loss` plus
    ``sum_j d_ij grad r_ij``, a term through the softmax Jacobian
    ``diag(r_i) - r_i r_i^T`` scaled by the distances and by ``1 / (2 sigma^2)``.
    That term saturates more slowly (order ``beta e^-beta`` against ``e^-beta``,
    ``beta`` the margin over ``2 sigma^2``). The objective type of Deep
    k-Means, provided for comparison. The backward pass evaluates the derivative
    through the softmax in closed form from the shifted distances, so that it
    keeps its exponentially small part at low temperature instead of rounding
    it away (plain autograd would leave only rounding errors there).
    {shapes}
    sigma : float or Tensor
        Temperature.{sigma}{reduction}

    Returns
    -------
    Tensor

    Examples
    --------
    >>> import torch
    >>> from softkmeans.torch import expected_distortion
    >>> h = torch.tensor([[1.0]])
    >>> round(expected_distortion(h, torch.tensor([[0.0], [2.0]]), sigma=1.0).item(), 6)
    1.0
    """
    rows, mu, tau = _prepare(h, centers, _check_sigma(sigma))
    values, _ = _apply(_ExpectedDistortion, rows, mu, tau)
    return _reduce(values, reduction, h.shape[:-1], weight)


@_fill_doc
def responsibilities(h, centers, sigma, alpha=None):
    """Soft assignments of every row of ``h`` to every centroid, differentiable.

    Softmax ``r_ij = softmax_j(-||h_i - mu_j||^2 / (2 sigma^2))`` when ``alpha`` is
    None, entmax-alpha (exact zeros) otherwise: the map of
    :func:`softkmeans.diagnostics.responsibilities`. One-hot exactly in the limit
    of small ``sigma``; NaN only in a row of ``h`` with a NaN.
    {shapes}
    sigma : float or Tensor
        Temperature.{sigma}
    alpha : float or None, default=None
        Entmax order (> 1), or None for softmax.

    Returns
    -------
    Tensor of shape (..., n_clusters)
        Rows sum to 1.

    Examples
    --------
    >>> import torch
    >>> from softkmeans.torch import responsibilities
    >>> h, centers = torch.tensor([[0.0], [1.0]]), torch.tensor([[0.0], [2.0]])
    >>> responsibilities(h, centers, sigma=0.5, alpha=1.5).tolist()
    [[1.0, 0.0], [0.5, 0.5]]
    """
    alpha = None if alpha is None else _check_alpha(alpha)
    return _responsibilities(h, centers, _check_sigma(sigma), alpha)


def _responsibilities(h, centers, sigma, alpha):
    """:func:`responsibilities` at a checked ``sigma`` and ``alpha``."""
    rows, mu, tau = _prepare(h, centers, sigma)
    resp = _resp_from_distances(_sq_distances(rows, mu), tau, alpha, True)
    return resp.reshape(*h.shape[:-1], mu.shape[0])


# ----------------------------------------------------------------------------- temperature


@torch.no_grad()
def tied_sigma(h, centers, relative_sigma=0.1, weight=None):
    """Temperature tied to the scale of the representation.

    ``sigma^2 = relative_sigma * mean_i min_j ||h_i - mu_j||^2``: the temperature
    follows the representation when it contracts or grows, so that the ratio of
    the critical temperature to ``sigma^2`` does not drift (see
    :func:`critical_ratio`). No gradient flows through it.

    Parameters
    ----------
    h : Tensor of shape (..., dim)
    centers : Tensor of shape (n_clusters, dim)
    relative_sigma : float, default=0.1
        The factor ``c`` of ``sigma^2``.
    weight : Tensor of shape h.shape[:-1], default=None
        Sample weights of the mean.

    Returns
    -------
    Tensor
        A scalar, the temperature ``sigma`` (not its square), in the compute dtype.

    Examples
    --------
    >>> import torch
    >>> from softkmeans.torch import tied_sigma
    >>> h, centers = torch.tensor([[0.0], [3.0]]), torch.tensor([[1.0], [5.0]])
    >>> round(tied_sigma(h, centers, relative_sigma=0.4).item(), 6)  # 0.4 x (1 + 4) / 2
    1.0
    """
    c = float(relative_sigma)
    if not (c > 0 and math.isfinite(c)):
        raise ValueError("relative_sigma must be a positive finite number; got "
                         f"{relative_sigma!r}.")
    rows, mu, _ = _prepare(h, centers)
    dmin = _sq_distances(rows.detach(), mu.detach()).min(1).values
    mean = _reduce(dmin, "mean", h.shape[:-1], weight)
    return (c * mean).sqrt()


@torch.no_grad()
def critical_ratio(h, sigma):
    """``lambda_max(C_h) / sigma^2``: below 1, every centroid collapses to the mean.

    ``C_h`` is the covariance of the rows of ``h``. For ``sigma^2`` above its
    largest eigenvalue the configuration with all centroids at the mean is a
    strict local minimum of ``F_sigma`` (the critical temperature of
    deterministic annealing), so a K-Means term at a fixed temperature merges its
    clusters once it has contracted the representation below that scale.

    Parameters
    ----------
    h : Tensor of shape (..., dim)
    sigma : float or Tensor
        Temperature.

    Returns
    -------
    float
        NaN for an ``h`` without rows (no covariance).

    Examples
    --------
    >>> import torch
    >>> from softkmeans.torch import critical_ratio
    >>> h = torch.tensor([[-1.0, 0.0], [1.0, 0.0]])  # variance 1 along the first axis
    >>> critical_ratio(h, sigma=0.5)
    4.0
    """
    sigma = float(_check_sigma(sigma))
    rows = h.detach().reshape(-1, h.shape[-1]).to(torch.float64)
    if not rows.shape[0]:
        return math.nan
    centered = rows - rows.mean(0)
    cov = centered.T @ centered / rows.shape[0]
    lam = float(torch.linalg.eigvalsh(cov)[-1]) if cov.numel() else 0.0
    return lam / sigma**2
