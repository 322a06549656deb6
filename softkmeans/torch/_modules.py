"""Modules: the K-Means term of a network and a vector-quantization layer.

State lives in buffers (or a parameter where an optimizer trains it), so that
``state_dict``, ``.to(device)`` and ``.half()`` carry it; every closed-form or
moving-average update runs under ``no_grad`` in float32 or better.
"""

import math
from typing import NamedTuple

import torch
from torch import nn

from ._functional import (
    _autocast_off,
    _check_alpha,
    _check_sigma,
    _compute_dtype,
    _objective,
    _resp_from_distances,
    _responsibilities,
    _sq_distances,
    critical_ratio,
    tied_sigma,
)

__all__ = ["KMeansTerm", "SoftVectorQuantizer", "VQOutput", "code_usage"]


def _check_relative(relative_sigma):
    value = float(relative_sigma)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError("relative_sigma must be a positive finite number; got "
                         f"{relative_sigma!r}.")
    return value


def _check_count(value, name):
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        raise ValueError(f"{name} must be a positive integer; got {value!r}.")
    return value


def _branch(pred, if_true, if_false, operands):
    """``if_true(*operands)`` where the boolean scalar tensor ``pred`` holds, else
    ``if_false(*operands)``: a Python branch when eager, ``torch.cond`` while Dynamo
    traces, so that bookkeeping on buffer values compiles without a graph break.

    Both functions return tensors of the same shapes and dtypes and leave their
    operands unchanged (``torch.cond``'s contract).
    """
    if torch.compiler.is_compiling():
        return torch.cond(pred, if_true, if_false, tuple(operands))
    return (if_true if bool(pred) else if_false)(*operands)


def _unchanged(rows, keys, has, *state):
    """The side of a :func:`_branch` on ``(rows, keys, has, *state)`` that keeps the state
    (copies while compiling: ``torch.cond`` allows no aliasing)."""
    if torch.compiler.is_compiling():
        return tuple(t.clone() for t in state)
    return state


def _moving_average(buffer, value, rate):
    """``buffer + rate * (value - buffer)`` in the dtype of ``value``, stored once."""
    old = buffer.to(value.dtype)
    buffer.copy_(old + rate * (value - old))


class _Collective:
    """Sums of statistics over the processes of ``self.process_group`` when ``self.sync``
    is set and ``torch.distributed`` is initialized (this process alone otherwise).
    All-reduces only: Dynamo traces them (not a broadcast)."""

    def _synced(self):
        if not self.sync:
            return False
        import torch.distributed as dist

        return dist.is_available() and dist.is_initialized()

    def _sum_over_processes(self, tensors):
        """All-reduce ``tensors`` in place (a no-op unless synced); returns them."""
        if self._synced():
            import torch.distributed as dist

            for tensor in tensors:
                dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=self.process_group)
        return tensors

    def _from_first_process(self, tensor):
        """``tensor`` as the group's first process has it, on every process when synced
        (an all-reduce of it and zeros: exact)."""
        if not self._synced():
            return tensor
        import torch.distributed as dist

        if dist.get_rank(self.process_group) != 0:
            tensor = torch.zeros_like(tensor)
        return self._sum_over_processes([tensor])[0]

    def _nearest_sum_count(self, rows, centers):
        """Sum over the rows of the squared distance to the nearest centroid, and the
        number of rows, over the processes."""
        dmin = _sq_distances(rows, centers).min(1).values
        total = dmin.sum()
        stats = torch.stack([total, total.new_full((), dmin.shape[0])])
        return self._sum_over_processes([stats])[0]


class KMeansTerm(_Collective, nn.Module):
    """K-Means term of a network: ``F_sigma`` or ``F^(alpha)`` of its representations.

    Holds the centroids and the temperature. Add ``gamma * term(h)`` to a loss that
    prevents the collapse of the representation (a reconstruction loss, say): a
    K-Means term alone is minimized by mapping every input to one point. The
    gradient with respect to ``h`` pulls every representation toward the
    responsibility-weighted mean of the centroids and does not vanish at low
    temperature (:func:`kmeans_loss`).

    Parameters
    ----------
    n_clusters : int
        Number of centroids ``k``.
    dim : int
        Dimension of the representations.
    sigma : float or None, default=None
        A fixed temperature, or None to tie it to the scale of the representation:
        ``sigma^2 = relative_sigma * mean_i min_j ||h_i - mu_j||^2``, recomputed
        without gradient from every training batch and by :meth:`update_centers`.
        A fixed temperature lets the term contract the representation until
        :meth:`critical_ratio` falls below one, where every cluster merges.
    relative_sigma : float, default=0.1
        The factor of the tied temperature.
    alpha : float or None, default=None
        None for the softmax form ``F_sigma``; an entmax order (> 1, 1.5 is exact by
        sorting) for the Tsallis form, which equals the hard distortion on every row
        whose margin is at least ``2 sigma^2 / (alpha - 1)``.
    learn_centers : bool, default=False
        Hold the centroids in a parameter for an optimizer instead of a buffer
        updated by :meth:`update_centers`. A step size shared by all centroids is
        limited by the heaviest cluster; the closed form needs none.
    reduction : {"mean", "sum"}, default="mean"
        Mean over the rows of the batch (independent of the batch size) or the sum
        (the objective as the paper writes it).
    sync : bool, default=False
        With ``torch.distributed`` initialized, let every process of ``process_group``
        keep the same centroids and temperature: the tied temperature's mean distance
        and the masses and sums of :meth:`update_centers` are all-reduced (the result
        of one process holding every batch), and :meth:`init_centers` takes the first
        process's centroids. :meth:`critical_ratio` stays local.
    process_group : optional
        For ``sync``; the default group when None.
    device, dtype : optional
        Of the centroids.

    Attributes
    ----------
    centers : Tensor of shape (n_clusters, dim)
        The centroids (a buffer, or a parameter with ``learn_centers=True``); drawn
        from a standard normal until :meth:`init_centers` or :meth:`update_centers`.
    sigma : Tensor
        The temperature in use (a scalar buffer; NaN until a tied temperature has
        been set). A state dict whose ``sigma`` differs from a fixed temperature is
        refused by :meth:`load_state_dict` (ValueError).

    Examples
    --------
    >>> import torch
    >>> from softkmeans.torch import KMeansTerm
    >>> _ = torch.manual_seed(0)
    >>> h = torch.cat([torch.randn(50, 2) - 4, torch.randn(50, 2) + 4])
    >>> term = KMeansTerm(2, 2).init_centers(h, random_state=0)
    >>> loss = term(h)                  # mean of F_sigma over the rows
    >>> term.update_centers(h)          # closed-form (EM) step, no learning rate
    KMeansTerm(n_clusters=2, dim=2, sigma=tied (relative_sigma=0.1), alpha=None)
    >>> term.critical_ratio(h) > 1     # far from the collapse of the clusters
    True
    """

    def __init__(self, n_clusters, dim, sigma=None, relative_sigma=0.1, alpha=None, *,
                 learn_centers=False, reduction="mean", sync=False, process_group=None,
                 device=None, dtype=None):
        super().__init__()
        self.n_clusters = _check_count(n_clusters, "n_clusters")
        self.dim = _check_count(dim, "dim")
        self.fixed_sigma = None if sigma is None else float(_check_sigma(sigma))
        self.relative_sigma = _check_relative(relative_sigma)
        self.alpha = None if alpha is None else _check_alpha(alpha)
        if reduction not in ("mean", "sum"):
            raise ValueError(f"reduction must be 'mean' or 'sum'; got {reduction!r}.")
        self.reduction = reduction
        self.sync, self.process_group = bool(sync), process_group
        centers = torch.randn(n_clusters, dim, device=device, dtype=dtype)
        if learn_centers:
            self.centers = nn.Parameter(centers)
        else:
            self.register_buffer("centers", centers)
        value = math.nan if sigma is None else self.fixed_sigma
        self.register_buffer("sigma", torch.tensor(value, device=device, dtype=dtype))

    @property
    def tied(self):
        """Whether the temperature follows the representation."""
        return self.fixed_sigma is None

    def extra_repr(self):
        sigma = (f"tied (relative_sigma={self.relative_sigma:g})" if self.tied
                 else f"{self.fixed_sigma:g}")
        return f"n_clusters={self.n_clusters}, dim={self.dim}, sigma={sigma}, alpha={self.alpha}"

    @torch.no_grad()
    def update_sigma(self, h):
        """Set a tied temperature from ``h`` and the current centroids (no-op when fixed).

        Parameters
        ----------
        h : Tensor of shape (..., dim)

        Returns
        -------
        Tensor
            The temperature in use (unchanged by an ``h`` without rows).
        """
        if self.tied and h.numel():
            self.sigma.copy_(self._tied(h.detach(), self.centers.detach(), self.sigma))
        return self.sigma

    def _temperature(self, h):
        """The batch's tied temperature in training mode (or before one is set), else the
        buffer (also for a batch without rows)."""
        if not self.tied or not h.numel():
            return self.sigma
        if self.training:
            return self._tied(h.detach(), self.centers.detach(), self.sigma)
        return _branch(torch.isnan(self.sigma), self._tied, self._stored,
                       (h.detach(), self.centers.detach(), self.sigma))

    def _tied(self, h, centers, sigma):
        """:func:`tied_sigma` of ``h``, or of every process's batch when synced."""
        if not self._synced():
            return tied_sigma(h, centers, self.relative_sigma)
        dtype = _compute_dtype(h, centers)
        total, count = self._nearest_sum_count(h.reshape(-1, self.dim).to(dtype),
                                               centers.to(dtype))
        return (self.relative_sigma * (total / count)).sqrt()

    @staticmethod
    def _stored(h, centers, sigma):
        return sigma.to(_compute_dtype(h, centers), copy=True)

    def forward(self, h):
        """The K-Means term of the batch ``h`` (shape ``(..., dim)``), a scalar.

        In training mode a tied temperature is recomputed from the batch first; a
        batch without rows leaves it as it is and gives 0 (``reduction="sum"``) or
        NaN (``"mean"``, as torch's losses).
        """
        sigma = self._temperature(h)
        if self.tied and self.training:
            with torch.no_grad():
                self.sigma.copy_(sigma)
        return _objective(h, self.centers, sigma, self.alpha, self.reduction)

    @torch.no_grad()
    def responsibilities(self, h):
        """Soft assignments of ``h`` at the current temperature, shape ``(..., n_clusters)``."""
        return _responsibilities(h, self.centers, self._temperature(h), self.alpha)

    @torch.no_grad()
    def predict(self, h):
        """Index of the nearest centroid of every row of ``h``."""
        rows = h.reshape(-1, self.dim).to(_compute_dtype(h, self.centers))
        labels = _sq_distances(rows, self.centers.to(rows.dtype)).argmin(1)
        return labels.reshape(h.shape[:-1])

    @torch.no_grad()
    def update_centers(self, h, n_iter=1, weight=None):
        """Closed-form centroid update: ``mu_j <- sum_i r_ij h_i / sum_i r_ij``.

        One alternating (EM) step per iteration; each step decreases ``F_sigma``
        by at least ``sum_j m_j ||mu_j^new - mu_j||^2`` (``m_j`` the masses), with
        no learning rate. A tied temperature is set from ``h`` before each step.
        A centroid with zero mass (possible with entmax) stays where it is.

        Parameters
        ----------
        h : Tensor of shape (..., dim)
            Representations, typically those of the whole training set.
        n_iter : int, default=1
        weight : Tensor of shape h.shape[:-1], default=None
            Sample weights.

        Returns
        -------
        self
        """
        dtype = _compute_dtype(h, self.centers)
        rows = h.detach().reshape(-1, self.dim).to(dtype)
        w = None if weight is None else weight.reshape(-1, 1).to(rows)
        for _ in range(_check_count(n_iter, "n_iter")):
            centers = self.centers.detach().to(dtype)
            sigma = self.update_sigma(rows).to(dtype)
            resp = _responsibilities(rows, centers, sigma, self.alpha)
            if w is not None:
                resp = resp * w
            with _autocast_off(rows):
                mass, sums = self._sum_over_processes([resp.sum(0), resp.T @ rows])
            new = torch.where(mass[:, None] > 0, sums / mass.clamp_min(
                torch.finfo(dtype).tiny)[:, None], centers)
            self.centers.copy_(new)
        return self

    @torch.no_grad()
    def init_centers(self, h, n_init=10, random_state=None):
        """Centroids from scikit-learn's K-Means on ``h`` (k-means++, ``n_init`` restarts).

        Parameters
        ----------
        h : Tensor of shape (..., dim)
        n_init : int, default=10
        random_state : int or None, default=None

        Returns
        -------
        self
        """
        from sklearn.cluster import KMeans

        rows = h.detach().reshape(-1, self.dim).to("cpu", torch.float64).numpy()
        fitted = KMeans(self.n_clusters, n_init=n_init, random_state=random_state).fit(rows)
        centers = torch.as_tensor(fitted.cluster_centers_).to(self.centers)
        self.centers.copy_(self._from_first_process(centers))
        self.update_sigma(h)
        return self

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        """Refuse a ``sigma`` other than a fixed temperature (a tied one's NaN, say)."""
        loaded = state_dict.get(prefix + "sigma")
        if not self.tied and loaded is not None and not torch.equal(
                loaded.to(self.sigma), self.sigma):
            raise ValueError("this KMeansTerm has the fixed temperature "
                             f"sigma={self.fixed_sigma:g}; the state dict holds "
                             f"sigma={float(loaded):g} (nan: a tied temperature not yet "
                             "set). Build the module with the state's "
                             "sigma, or sigma=None to tie it.")
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @torch.no_grad()
    def critical_ratio(self, h):
        """``lambda_max(C_h) / sigma^2`` at the temperature in use (see :func:`critical_ratio`).

        Below 1, the configuration with every centroid at the mean of ``h`` is a
        strict local minimum of ``F_sigma``: the clustering collapses.

        Parameters
        ----------
        h : Tensor of shape (..., dim)

        Returns
        -------
        float
        """
        return critical_ratio(h, self._temperature(h))


class VQOutput(NamedTuple):
    """What :class:`SoftVectorQuantizer` returns.

    Attributes
    ----------
    quantized : Tensor
        The nearest codes (projected out), with the straight-through gradient to the
        input; 0 at masked positions.
    codes : LongTensor
        Index of the nearest code of every vector: the input's shape without its
        last dimension, plus a last dimension of ``heads`` when ``heads > 1``;
        -1 at masked positions.
    loss : Tensor
        Commitment loss, plus the codebook loss when the codebook follows a gradient
        (0 on no vectors).

    Examples
    --------
    >>> import torch
    >>> from softkmeans.torch import SoftVectorQuantizer
    >>> quantized, codes, loss = SoftVectorQuantizer(4, 2)(torch.randn(10, 2))
    >>> codes.shape
    torch.Size([10])
    """

    quantized: torch.Tensor
    codes: torch.Tensor
    loss: torch.Tensor


@torch.no_grad()
def code_usage(codes, num_codes):
    """Perplexity and number of codes in use among ``codes`` (negative ones, masked, left out).

    The perplexity is ``exp`` of the entropy of the code frequencies: ``num_codes``
    when every code is used equally, 1 when a single code is.

    Parameters
    ----------
    codes : LongTensor
        Code indices, any shape.
    num_codes : int

    Returns
    -------
    perplexity : float
    used : int

    Examples
    --------
    >>> import torch
    >>> from softkmeans.torch import code_usage
    >>> code_usage(torch.tensor([0, 1, 2, 3, 0, 1, 2, 3, -1]), 16)
    (4.0, 4)
    """
    codes = codes.reshape(-1)
    counts = torch.bincount(codes[codes >= 0], minlength=num_codes).double()
    freq = counts / counts.sum().clamp_min(1)
    entropy = -torch.special.xlogy(freq, freq).sum()
    return round(float(entropy.exp()), 12), int((counts > 0).sum())


def _check_decay(decay):
    value = float(decay)
    if not 0 <= value <= 1:
        raise ValueError(f"decay must lie in [0, 1]; got {decay!r}.")
    return value


def _check_threshold(threshold):
    value = float(threshold)
    if not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"dead_threshold must be a non-negative finite number; got "
                         f"{threshold!r}.")
    return value


def _codebook_dim(dim, heads, codebook_dim):
    """The dimension of the codes: ``dim / heads`` unless given."""
    if codebook_dim is not None:
        return _check_count(codebook_dim, "codebook_dim")
    if dim % heads:
        raise ValueError(f"dim ({dim}) must be a multiple of heads ({heads}) unless "
                         "codebook_dim is given.")
    return dim // heads


class SoftVectorQuantizer(_Collective, nn.Module):
    """Vector quantizer whose codebook follows hard, softmax or entmax responsibilities.

    The forward pass quantizes every vector (last dimension) to its nearest code,
    with the straight-through estimator for the encoder (the output is the code
    exactly, its gradient the identity) and the commitment loss
    ``commitment * ||z - sg(q)||^2`` (mean over elements). Only the codebook
    update changes with ``assignment`` and ``update``:

    - ``update="gradient"``: the codebook is a parameter and the returned loss
      adds a codebook loss on ``sg(z)``: ``||sg(z) - q||^2`` for hard assignments
      (the VQ-VAE loss), ``F_sigma`` or ``F^(alpha)`` for softmax and entmax,
      each divided by the number of elements.
    - ``update="ema"``: in training mode, the codes are the
      responsibility-weighted means of the inputs maintained by moving averages
      of the masses and the weighted sums, without additive smoothing, so that a
      code with no mass stays where it is (for hard assignments, the
      moving-average VQ-VAE, an online Lloyd algorithm; for soft ones, online
      alternating minimization of the relaxed objective).

    With soft responsibilities every code receives a force from every input in
    proportion to its responsibility, so a code that is never the nearest one
    still moves toward the data: the codebook stays in use without resets.

    The moving averages are bias-corrected: after ``t`` steps a statistic is
    ``sum_s decay^(t-s) x_s / sum_s decay^(t-s)``, the plain mean of the steps for
    ``decay=1``. A training step on no vectors (an empty batch, or every position
    masked) changes no state.

    Parameters
    ----------
    num_codes : int
    dim : int
        Dimension of the input vectors (the input's last dimension).
    assignment : {"hard", "softmax", "entmax"}, default="softmax"
    update : {"ema", "gradient"}, default="ema"
    commitment : float, default=0.25
        Weight of the commitment loss.
    decay : float, default=0.99
        Of the moving averages, in [0, 1]; 1 averages every step equally.
    relative_sigma : float, default=0.1
        The temperature of soft assignments is tied to the batch:
        ``sigma^2 = relative_sigma * mean squared distance to the nearest code``.
    sigma : float or None, default=None
        A fixed temperature instead.
    alpha : float, default=1.5
        Entmax order of ``assignment="entmax"``.
    reset_every : int or None, default=None
        Every this many training steps (not at step 0), move each code whose
        moving-average usage is below ``dead_threshold`` to an input of the batch,
        distinct inputs for distinct codes (the dead-code reset of Dhariwal et al.
        2020). None: never. ``reset_every=1, dead_threshold=2`` is
        vector-quantize-pytorch's ``threshold_ema_dead_code=2``.
    dead_threshold : float, default=1.0
        Assignments per step below which a code is dead.
    kmeans_init : bool, default=False
        Set the codebook by :meth:`init_codebook` (K-Means) on the first training
        batch with vectors instead of drawing inputs; that batch needs at least
        ``num_codes`` of them (else ValueError: call :meth:`init_codebook` on more).
        Needs an eager first step (or a call to :meth:`init_codebook`) under
        ``torch.compile``, whose graph draws inputs.
    cosine : bool, default=False
        Normalize the vectors and the codes to unit length: nearest by cosine
        similarity, codes on the sphere (the outputs too).
    heads : int, default=1
        Split every vector (after ``project_in``) into this many pieces, each
        quantized with the shared codebook.
    codebook_dim : int or None, default=None
        Dimension of the codes; ``dim / heads`` when None. When
        ``heads * codebook_dim != dim`` the layer has linear projections
        ``project_in`` and ``project_out`` (parameters for the optimizer).
    sync : bool, default=False
        All-reduce the codebook statistics (counts, sums, usage, the tied
        temperature's mean distance) over the processes of ``process_group``
        with ``torch.distributed``, so that every process keeps the same codebook;
        code initialization and resets come from rank 0. Every process then
        passes at least one vector per step (pad and mask instead).
    process_group : optional
        For ``sync``; the default group when None.
    device, dtype : optional

    Attributes
    ----------
    codebook : Tensor of shape (num_codes, codebook_dim)
        A parameter with ``update="gradient"``, a buffer with ``"ema"``. Set on the
        first training step to distinct random inputs of the batch (when the batch
        has fewer vectors than codes, the others are inputs again plus a Gaussian
        perturbation of 1e-3 of the batch's root mean square), by K-Means with
        ``kmeans_init``, or by :meth:`init_codebook` or :meth:`set_codebook`.
    usage : Tensor of shape (num_codes,)
        Moving average of the number of (hard) assignments per step.
    project_in, project_out : Module
        Linear projections to and from the codes' dimension, or identities.

    Examples
    --------
    >>> import torch
    >>> from softkmeans.torch import SoftVectorQuantizer, code_usage
    >>> _ = torch.manual_seed(0)
    >>> vq = SoftVectorQuantizer(16, 4, assignment="softmax", update="ema")
    >>> z = torch.randn(8, 10, 4, requires_grad=True)
    >>> out = vq(z)
    >>> out.quantized.shape, out.codes.shape
    (torch.Size([8, 10, 4]), torch.Size([8, 10]))
    >>> out.loss.backward()             # commitment loss; the codebook follows the EMA
    >>> perplexity, used = code_usage(out.codes, 16)
    >>> used <= 16
    True
    >>> with torch.no_grad():            # evaluation: outputs are exactly the codes
    ...     out = vq.eval()(z)
    >>> torch.equal(vq.get_output_from_indices(out.codes), out.quantized)
    True
    """

    def __init__(self, num_codes, dim, *, assignment="softmax", update="ema", commitment=0.25,
                 decay=0.99, relative_sigma=0.1, sigma=None, alpha=1.5, reset_every=None,
                 dead_threshold=1.0, kmeans_init=False, cosine=False, heads=1,
                 codebook_dim=None, sync=False, process_group=None, device=None, dtype=None):
        super().__init__()
        self.num_codes = _check_count(num_codes, "num_codes")
        self.dim = _check_count(dim, "dim")
        if assignment not in ("hard", "softmax", "entmax"):
            raise ValueError("assignment must be 'hard', 'softmax' or 'entmax'; got "
                             f"{assignment!r}.")
        if update not in ("ema", "gradient"):
            raise ValueError(f"update must be 'ema' or 'gradient'; got {update!r}.")
        self.assignment, self.update = assignment, update
        self.commitment, self.decay = float(commitment), _check_decay(decay)
        self.relative_sigma = _check_relative(relative_sigma)
        self.fixed_sigma = None if sigma is None else float(_check_sigma(sigma))
        self.alpha = _check_alpha(alpha) if assignment == "entmax" else None
        self.reset_every = None if reset_every is None else _check_count(reset_every,
                                                                         "reset_every")
        self.dead_threshold = _check_threshold(dead_threshold)
        self.kmeans_init, self.cosine = bool(kmeans_init), bool(cosine)
        self.heads = _check_count(heads, "heads")
        self.codebook_dim = _codebook_dim(self.dim, self.heads, codebook_dim)
        self.sync, self.process_group = bool(sync), process_group
        factory = {"device": device, "dtype": dtype}
        inner = self.heads * self.codebook_dim
        projected = inner != self.dim
        self.project_in = nn.Linear(self.dim, inner, **factory) if projected else nn.Identity()
        self.project_out = nn.Linear(inner, self.dim, **factory) if projected else nn.Identity()
        codebook = self._on_sphere(torch.randn(num_codes, self.codebook_dim, **factory))
        if update == "gradient":
            self.codebook = nn.Parameter(codebook)
        else:
            self.register_buffer("codebook", codebook)
        self.register_buffer("ema_counts", torch.zeros(num_codes, **factory))
        self.register_buffer("ema_sums", torch.zeros(num_codes, self.codebook_dim, **factory))
        self.register_buffer("usage", torch.zeros(num_codes, **factory))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long, device=device))
        self.register_buffer("initialized", torch.zeros((), dtype=torch.bool, device=device))

    def extra_repr(self):
        return (f"num_codes={self.num_codes}, dim={self.dim}, assignment={self.assignment!r}, "
                f"update={self.update!r}, heads={self.heads}, codebook_dim={self.codebook_dim}, "
                f"cosine={self.cosine}")

    # ------------------------------------------------------------------------- vectors

    def _on_sphere(self, vectors):
        """Unit-length ``vectors`` with ``cosine``, else themselves."""
        return nn.functional.normalize(vectors, dim=-1) if self.cosine else vectors

    def _check_input(self, z, mask):
        if not isinstance(z, torch.Tensor):
            raise TypeError(f"z must be a torch tensor; got {type(z).__name__}.")
        if z.dim() < 1 or z.shape[-1] != self.dim:
            raise ValueError(f"z must have shape (..., {self.dim}); got {tuple(z.shape)}.")
        if mask is None:
            return
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
            raise TypeError(f"mask must be a boolean tensor; got {got}.")
        if mask.shape != z.shape[:-1]:
            raise ValueError(f"mask must have shape {tuple(z.shape[:-1])} (z's without its "
                             f"last dimension); got {tuple(mask.shape)}.")

    def _vectors(self, z, mask):
        """The vectors to quantize, as rows in the compute dtype (on the sphere with
        ``cosine``; masked rows at 0, so that a NaN in padding spreads nowhere, not
        even into gradients), the projected input, and which rows are kept (None:
        all)."""
        self._check_input(z, mask)
        x = self.project_in(z)
        dtype = _compute_dtype(x, self.codebook)
        rows = self._on_sphere(x.reshape(-1, self.codebook_dim).to(dtype))
        if mask is None:
            return rows, x, None
        keep = mask[..., None].expand(*mask.shape, self.heads).reshape(-1)
        return torch.where(keep[:, None], rows, 0.0), x, keep

    @staticmethod
    def _masked_mean(values, keep, dim):
        """The mean of the kept per-row ``values``, divided by ``dim`` (0 on none)."""
        if keep is None:
            return values.sum() / (values.shape[0] * dim) if values.shape[0] else values.sum()
        total = torch.where(keep, values, 0.0).sum()
        return total / (keep.sum().clamp_min(1) * dim)

    # ------------------------------------------------------------------------- codebook setters

    @torch.no_grad()
    def set_codebook(self, codebook):
        """Take ``codebook`` (shape ``(num_codes, codebook_dim)``) as the codes and mark
        the layer initialized (rank 0's codes when synced). The statistics start
        afresh: moving averages and step count at 0, so that the usage is that of the
        steps from now on and no reset comes at the next step.

        Returns
        -------
        self
        """
        if tuple(codebook.shape) != tuple(self.codebook.shape):
            raise ValueError(f"codebook must have shape {tuple(self.codebook.shape)}; got "
                             f"{tuple(codebook.shape)}.")
        codes = self._on_sphere(codebook.to(self.codebook))
        self.codebook.copy_(self._from_first_process(codes))
        for buffer in (self.ema_sums, self.ema_counts, self.usage, self.steps):
            buffer.zero_()
        self.initialized.fill_(True)
        return self

    @torch.no_grad()
    def init_codebook(self, z, mask=None, random_state=None):
        """Codes from :class:`softkmeans.SoftKMeans` (one k-means++ start) on the vectors
        of ``z`` (shape ``(..., dim)``, the layer's input), then :meth:`set_codebook`.

        Parameters
        ----------
        z : Tensor of shape (..., dim)
            At least ``num_codes`` vectors (after masking and splitting into heads).
        mask : BoolTensor of shape z.shape[:-1], default=None
            The positions to use.
        random_state : int or None, default=None
            Seed of the K-Means; None draws one from torch's generator.

        Returns
        -------
        self
        """
        from softkmeans import SoftKMeans

        rows, _, keep = self._vectors(z, mask)
        if keep is not None:
            rows = rows[keep]
        if rows.shape[0] < self.num_codes:
            raise ValueError(f"K-Means initialization needs at least num_codes={self.num_codes} "
                             f"vectors; got {rows.shape[0]}.")
        if random_state is None:
            random_state = int(torch.randint(2**31 - 1, ()))
        fitted = SoftKMeans(self.num_codes, n_init=1, random_state=random_state).fit(
            rows.detach().to("cpu", torch.float64).numpy())
        return self.set_codebook(torch.as_tensor(fitted.cluster_centers_))

    def get_codes_from_indices(self, codes):
        """The codes of ``codes`` (as :class:`VQOutput` gives them), concatenated over
        the heads: shape ``(..., heads * codebook_dim)``; 0 for -1 (masked).

        Examples
        --------
        >>> import torch
        >>> from softkmeans.torch import SoftVectorQuantizer
        >>> vq = SoftVectorQuantizer(4, 6, heads=2).eval()
        >>> vq.get_codes_from_indices(torch.tensor([[0, 3], [-1, 1]])).shape
        torch.Size([2, 6])
        """
        batch = codes.shape if self.heads == 1 else codes.shape[:-1]
        flat = codes.reshape(-1)
        vectors = self.codebook[flat.clamp_min(0)] * (flat >= 0)[:, None]
        return vectors.reshape(*batch, self.heads * self.codebook_dim)

    def get_output_from_indices(self, codes):
        """What the forward pass outputs for ``codes``: :meth:`get_codes_from_indices`
        projected out, shape ``(..., dim)`` (0 at -1 only without projections)."""
        return self.project_out(self.get_codes_from_indices(codes))

    # ------------------------------------------------------------------------- bookkeeping

    def _rate(self, dtype):
        """Weight of the coming step in the bias-corrected moving averages (exactly 1 on
        the first step: the averages are then that step's statistics)."""
        t = (self.steps + 1).to(dtype)
        if self.decay == 1.0:
            return 1.0 / t
        return torch.where(t > 1, (1.0 - self.decay) / (1.0 - torch.pow(self.decay, t)), 1.0)

    def _keys(self, rows, keep):
        """Random sort keys of the rows, masked ones (key >= 1) last."""
        keys = torch.rand(rows.shape[0], device=rows.device)
        return keys if keep is None else keys + (~keep).to(keys.dtype)

    def _draws(self, rows, keys):
        """``num_codes`` codes at distinct kept rows in random order; beyond the number of
        kept rows, rows again plus a perturbation of 1e-3 of the batch's root mean square
        (rank 0's when synced)."""
        kept = (keys < 1).sum().clamp_min(1)
        index = torch.arange(self.num_codes, device=rows.device)
        picks = rows[keys.argsort()[index % kept]]
        scale = 1e-3 * rows.square().mean().sqrt().clamp_min(torch.finfo(rows.dtype).eps)
        picks = picks + (index >= kept)[:, None] * scale * torch.randn_like(picks)
        return self._from_first_process(self._on_sphere(picks))

    @torch.no_grad()
    def _maintain(self, rows, keys, count):
        """Codes at distinct inputs on the first training step with vectors; on every
        later step that is a multiple of ``reset_every``, dead codes reset. Before the
        codebook enters the step's graph; tensor operations throughout, so that it
        compiles."""
        buffers = (self.codebook.detach(), self.ema_sums, self.ema_counts, self.usage)
        has = count > 0
        later = _unchanged if self.reset_every is None else self._reset_if_due
        state = _branch(has & ~self.initialized, self._initial, later,
                        (rows, keys, has, *buffers))
        for buffer, value in zip(buffers, state, strict=True):
            buffer.copy_(value)  # a no-op where the state is the buffer itself
        self.initialized.logical_or_(has)

    def _reset_if_due(self, rows, keys, has, *state):
        due = has & (self.steps > 0) & (self.steps % self.reset_every == 0)
        return _branch(due, self._reset_dead, _unchanged, (rows, keys, has, *state))

    def _initial(self, rows, keys, has, codebook, sums, counts, usage):
        # no prior mass: a code goes to the weighted mean of its first responsibilities,
        # however small they are
        return (self._draws(rows, keys).to(codebook), torch.zeros_like(sums),
                torch.zeros_like(counts), usage.clone())

    def _reset_dead(self, rows, keys, has, codebook, sums, counts, usage):
        dead = usage < self.dead_threshold
        fresh = self._draws(rows, keys).to(codebook)[(dead.cumsum(0) - 1).clamp_min(0)]
        return (torch.where(dead[:, None], fresh, codebook), torch.where(dead[:, None], 0.0, sums),
                torch.where(dead, 0.0, counts), torch.where(dead, self.dead_threshold, usage))

    def _sigma(self, dist, codes, keep):
        """The temperature of soft assignments from the distances to the codes (None for
        hard ones): tied to the mean distance to the nearest code over the kept rows."""
        if self.assignment == "hard":
            return None
        if self.fixed_sigma is not None:
            return dist.new_tensor(self.fixed_sigma)
        nearest = dist.gather(1, codes[:, None]).squeeze(1)
        if keep is not None:
            nearest = torch.where(keep, nearest, 0.0)
        count = nearest.new_full((), nearest.shape[0]) if keep is None else keep.sum().to(nearest)
        total, count = self._sum_over_processes([torch.stack([nearest.sum(), count])])[0]
        return (self.relative_sigma * total / count.clamp_min(1)).clamp_min(
            torch.finfo(dist.dtype).tiny).sqrt()

    def _responsibilities(self, dist, codes, sigma):
        if sigma is None:
            return nn.functional.one_hot(codes, self.num_codes).to(dist.dtype)
        return _resp_from_distances(dist, 2.0 * sigma * sigma, self.alpha, True)

    @torch.no_grad()
    def _train_step(self, rows, keep, dist, codes, sigma):
        """Moving averages of the usage and (``update="ema"``) of the masses and sums, and
        the codes as their ratio; no change on a step without vectors."""
        dtype = rows.dtype
        weight = torch.ones_like(codes, dtype=dtype) if keep is None else keep.to(dtype)
        stats = [torch.zeros(self.num_codes, dtype=dtype, device=rows.device).index_add_(
            0, codes, weight), weight.sum()]
        if self.update == "ema":
            resp = self._responsibilities(dist, codes, sigma) * weight[:, None]
            with _autocast_off(rows):
                stats += [resp.sum(0), resp.T @ rows]
        self._sum_over_processes(stats)
        has = stats[1] > 0
        rate = self._rate(dtype) * has
        _moving_average(self.usage, stats[0], rate)
        if self.update == "ema":
            _moving_average(self.ema_counts, stats[2], rate)
            _moving_average(self.ema_sums, stats[3], rate)
            counts = self.ema_counts[:, None]
            tiny = torch.finfo(counts.dtype).tiny
            means = self._on_sphere(self.ema_sums / counts.clamp_min(tiny))
            self.codebook.copy_(torch.where((counts > 0) & has, means, self.codebook))
        self.steps.add_(has.long())

    # ------------------------------------------------------------------------- forward

    def forward(self, z, mask=None):
        """Quantize ``z`` (shape ``(..., dim)``); returns a :class:`VQOutput`.

        Parameters
        ----------
        z : Tensor of shape (..., dim)
        mask : BoolTensor of shape z.shape[:-1], default=None
            Positions to quantize (True); the others (padding) take no part in the
            statistics, the initialization, the resets or the loss, and give the
            output 0 and the code -1.
        """
        rows, x, keep = self._vectors(z, mask)
        clean = rows.detach()
        train = self.training and rows.shape[0] > 0
        if train:
            self._before_step(z, mask, clean, keep)
        codebook = self.codebook.to(rows.dtype)
        with torch.no_grad():
            dist = _sq_distances(clean, codebook.detach())
            codes = dist.argmin(1)
        sigma = (self._sigma(dist, codes, keep)
                 if self.update == "gradient" or (train and self.assignment != "hard") else None)
        quantized = codebook[codes]
        per_row = self.commitment * ((rows - quantized.detach()) ** 2).sum(1)
        if self.update == "gradient":
            per_row = per_row + self._codebook_loss(clean, codebook, quantized, sigma)
        loss = self._masked_mean(per_row, keep, self.codebook_dim)
        if train:
            self._train_step(clean, keep, dist, codes, sigma)
        return self._output(z, x, quantized + (rows - rows.detach()), codes, loss, mask)

    def _before_step(self, z, mask, rows, keep):
        """K-Means on the first batch with vectors (``kmeans_init``, eager), then the
        draws and resets of :meth:`_maintain`."""
        count = rows.new_full((), rows.shape[0]) if keep is None else keep.sum().to(rows.dtype)
        if self.kmeans_init and not torch.compiler.is_compiling() and not bool(
                self.initialized) and bool(count > 0):
            self.init_codebook(z, mask)
        self._maintain(rows, self._keys(rows, keep), self._sum_over_processes([count])[0])

    def _codebook_loss(self, rows, codebook, quantized, sigma):
        """Per row: ``||sg(z) - q||^2`` (hard) or the relaxed objective of ``sg(z)``."""
        if sigma is None:
            return ((rows - quantized) ** 2).sum(1)
        return _objective(rows, codebook, sigma, self.alpha, "none")

    def _output(self, z, x, straight, codes, loss, mask):
        """The :class:`VQOutput` in the input's layout: heads joined, projected out, masked
        positions 0 and -1."""
        quantized = self.project_out(straight.reshape(x.shape).to(x.dtype))
        codes = codes.reshape(*x.shape[:-1], self.heads) if self.heads > 1 else codes.reshape(
            x.shape[:-1])
        if mask is not None:
            quantized = torch.where(mask[..., None], quantized, 0.0)
            codes = torch.where(mask[..., None] if self.heads > 1 else mask, codes, -1)
        return VQOutput(quantized.to(z.dtype), codes, loss)
