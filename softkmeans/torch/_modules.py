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
    _sq_distances,
    critical_ratio,
    entmax_kmeans_loss,
    kmeans_loss,
    responsibilities,
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


def _unchanged(rows, *state):
    """The side of a :func:`_branch` on ``(rows, *state)`` that keeps the state (copies
    while compiling: ``torch.cond`` allows no aliasing)."""
    if torch.compiler.is_compiling():
        return tuple(t.clone() for t in state)
    return state


def _moving_average(buffer, value, decay):
    """``decay * buffer + (1 - decay) * value`` in the dtype of ``value``, stored once."""
    buffer.copy_(buffer.to(value.dtype) * decay + (1 - decay) * value)


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


def _hard(rows, centers):
    """One-hot responsibilities of the nearest centroid."""
    labels = _sq_distances(rows, centers).argmin(1)
    return torch.nn.functional.one_hot(labels, centers.shape[0]).to(rows.dtype)


def _assignments(rows, centers, sigma, alpha):
    """Hard (``sigma`` None), softmax (``alpha`` None) or entmax responsibilities."""
    if sigma is None:
        return _hard(rows, centers)
    return responsibilities(rows, centers, sigma, alpha=alpha)


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
        been set).

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
            The temperature in use.
        """
        if self.tied:
            self.sigma.copy_(self._tied(h.detach(), self.centers.detach(), self.sigma))
        return self.sigma

    def _temperature(self, h):
        """The batch's tied temperature in training mode (or before one is set), else the
        buffer."""
        if not self.tied:
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

        In training mode a tied temperature is recomputed from the batch first.
        """
        sigma = self._temperature(h)
        if self.tied and self.training:
            with torch.no_grad():
                self.sigma.copy_(sigma)
        if self.alpha is None:
            return kmeans_loss(h, self.centers, sigma, reduction=self.reduction)
        return entmax_kmeans_loss(h, self.centers, sigma, self.alpha, reduction=self.reduction)

    @torch.no_grad()
    def responsibilities(self, h):
        """Soft assignments of ``h`` at the current temperature, shape ``(..., n_clusters)``."""
        return responsibilities(h, self.centers, self._temperature(h), alpha=self.alpha)

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
            resp = responsibilities(rows, centers, sigma, alpha=self.alpha)
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
        The nearest codes, with the straight-through gradient to the input.
    codes : LongTensor
        Index of the nearest code of every vector (the input's shape without its
        last dimension).
    loss : Tensor
        Commitment loss, plus the codebook loss when the codebook follows a gradient.

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
    """Perplexity and number of codes in use among ``codes``.

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
    >>> code_usage(torch.tensor([0, 1, 2, 3, 0, 1, 2, 3]), 16)
    (4.0, 4)
    """
    counts = torch.bincount(codes.reshape(-1), minlength=num_codes).double()
    freq = counts / counts.sum().clamp_min(1)
    entropy = -torch.special.xlogy(freq, freq).sum()
    return round(float(entropy.exp()), 12), int((counts > 0).sum())


class SoftVectorQuantizer(_Collective, nn.Module):
    """Vector quantizer whose codebook follows hard, softmax or entmax responsibilities.

    The forward pass quantizes every vector (last dimension) to its nearest code,
    with the straight-through estimator for the encoder and the commitment loss
    ``commitment * ||z - sg(q)||^2`` (mean over elements). Only the codebook
    update changes with ``assignment`` and ``update``:

    - ``update="gradient"``: the codebook is a parameter and the returned loss
      adds a codebook loss on ``sg(z)``: ``||sg(z) - q||^2`` for hard assignments
      (the VQ-VAE loss), ``F_sigma`` or ``F^(alpha)`` for softmax and entmax,
      each divided by the number of elements.
    - ``update="ema"``: in training mode, the codes are the
      responsibility-weighted means of the inputs maintained by exponential
      moving averages of the masses and the weighted sums, without additive
      smoothing, so that a code with no mass stays where it is (for hard
      assignments, the moving-average VQ-VAE, an online Lloyd algorithm; for
      soft ones, online alternating minimization of the relaxed objective).

    With soft responsibilities every code receives a force from every input in
    proportion to its responsibility, so a code that is never the nearest one
    still moves toward the data: the codebook stays in use without resets.

    Parameters
    ----------
    num_codes : int
    dim : int
        Dimension of the vectors (the input's last dimension).
    assignment : {"hard", "softmax", "entmax"}, default="softmax"
    update : {"ema", "gradient"}, default="ema"
    commitment : float, default=0.25
        Weight of the commitment loss.
    decay : float, default=0.99
        Of the moving averages.
    relative_sigma : float, default=0.1
        The temperature of soft assignments is tied to the batch:
        ``sigma^2 = relative_sigma * mean squared distance to the nearest code``.
    sigma : float or None, default=None
        A fixed temperature instead.
    alpha : float, default=1.5
        Entmax order of ``assignment="entmax"``.
    reset_every : int or None, default=None
        Every this many training steps, move each code whose moving-average usage
        is below one assignment per step to a random input of the batch (the
        dead-code reset of Dhariwal et al. 2020). None: never.
    sync : bool, default=False
        All-reduce the codebook statistics (counts, sums, usage, the tied
        temperature's mean distance) over the processes of ``process_group``
        with ``torch.distributed``, so that every process keeps the same codebook;
        code initialization and resets come from rank 0.
    process_group : optional
        For ``sync``; the default group when None.

    Attributes
    ----------
    codebook : Tensor of shape (num_codes, dim)
        A parameter with ``update="gradient"``, a buffer with ``"ema"``. The codes
        are set to random inputs of the first training batch.
    usage : Tensor of shape (num_codes,)
        Moving average of the number of (hard) assignments per step.

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
    """

    def __init__(self, num_codes, dim, *, assignment="softmax", update="ema", commitment=0.25,
                 decay=0.99, relative_sigma=0.1, sigma=None, alpha=1.5, reset_every=None,
                 sync=False, process_group=None, device=None, dtype=None):
        super().__init__()
        self.num_codes = _check_count(num_codes, "num_codes")
        self.dim = _check_count(dim, "dim")
        if assignment not in ("hard", "softmax", "entmax"):
            raise ValueError("assignment must be 'hard', 'softmax' or 'entmax'; got "
                             f"{assignment!r}.")
        if update not in ("ema", "gradient"):
            raise ValueError(f"update must be 'ema' or 'gradient'; got {update!r}.")
        if not 0 <= float(decay) < 1:
            raise ValueError(f"decay must lie in [0, 1); got {decay!r}.")
        self.assignment, self.update = assignment, update
        self.commitment, self.decay = float(commitment), float(decay)
        self.relative_sigma = _check_relative(relative_sigma)
        self.fixed_sigma = None if sigma is None else float(_check_sigma(sigma))
        self.alpha = _check_alpha(alpha) if assignment == "entmax" else None
        self.reset_every = None if reset_every is None else _check_count(reset_every,
                                                                         "reset_every")
        self.sync, self.process_group = bool(sync), process_group
        codebook = torch.randn(num_codes, dim, device=device, dtype=dtype)
        if update == "gradient":
            self.codebook = nn.Parameter(codebook)
        else:
            self.register_buffer("codebook", codebook)
        factory = {"device": device, "dtype": dtype}
        self.register_buffer("ema_counts", torch.zeros(num_codes, **factory))
        self.register_buffer("ema_sums", torch.zeros(num_codes, dim, **factory))
        self.register_buffer("usage", torch.zeros(num_codes, **factory))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long, device=device))
        self.register_buffer("initialized", torch.zeros((), dtype=torch.bool, device=device))

    def extra_repr(self):
        return (f"num_codes={self.num_codes}, dim={self.dim}, assignment={self.assignment!r}, "
                f"update={self.update!r}")

    def _sigma(self, rows, codebook):
        """The temperature of soft assignments (None for hard ones)."""
        if self.assignment == "hard":
            return None
        if self.fixed_sigma is not None:
            return self.fixed_sigma
        total, count = self._nearest_sum_count(rows, codebook)
        return (self.relative_sigma * total / count).clamp_min(
            torch.finfo(rows.dtype).tiny).sqrt()

    def _random_rows(self, rows, count):
        """``count`` random rows of the batch (those of the first process when synced)."""
        picks = rows[torch.randint(rows.shape[0], (count,), device=rows.device)]
        return self._from_first_process(picks)

    @torch.no_grad()
    def _maintain(self, rows):
        """Codes at random inputs on the first training step; on every later step that is
        a multiple of ``reset_every``, dead codes reset. Before the codebook enters the
        step's graph; tensor operations throughout, so that it compiles."""
        buffers = (self.codebook.detach(), self.ema_sums, self.ema_counts, self.usage)
        later = _unchanged if self.reset_every is None else self._reset_if_due
        state = _branch(self.initialized, later, self._initial, (rows, *buffers))
        for buffer, value in zip(buffers, state, strict=True):
            buffer.copy_(value)  # a no-op where the state is the buffer itself
        self.initialized.fill_(True)

    def _reset_if_due(self, rows, *state):
        due = self.steps % self.reset_every == 0
        return _branch(due, self._reset_dead, _unchanged, (rows, *state))

    def _initial(self, rows, codebook, sums, counts, usage):
        # no prior mass: a code goes to the weighted mean of its first responsibilities,
        # however small they are
        return (self._random_rows(rows, self.num_codes).to(codebook), torch.zeros_like(sums),
                torch.zeros_like(counts), usage.clone())

    def _reset_dead(self, rows, codebook, sums, counts, usage):
        dead = usage < 1.0
        fresh = self._random_rows(rows, int(dead.sum())).to(codebook)
        return (codebook.index_put((dead,), fresh), torch.where(dead[:, None], 0.0, sums),
                torch.where(dead, 0.0, counts), torch.where(dead, 1.0, usage))

    @torch.no_grad()
    def _train_step(self, rows, codes):
        dtype = rows.dtype
        codebook = self.codebook.detach().to(dtype)
        hard_counts = torch.zeros(self.num_codes, dtype=dtype, device=rows.device).index_add_(
            0, codes, torch.ones_like(codes, dtype=dtype))
        stats = [hard_counts]
        if self.update == "ema":
            resp = _assignments(rows, codebook, self._sigma(rows, codebook), self.alpha)
            with _autocast_off(rows):
                stats += [resp.sum(0), resp.T @ rows]
        self._sum_over_processes(stats)
        _moving_average(self.usage, stats[0], self.decay)
        if self.update == "ema":
            _moving_average(self.ema_counts, stats[1], self.decay)
            _moving_average(self.ema_sums, stats[2], self.decay)
            counts = self.ema_counts[:, None]
            means = self.ema_sums / counts.clamp_min(torch.finfo(counts.dtype).tiny)
            self.codebook.copy_(torch.where(counts > 0, means, self.codebook))
        self.steps.add_(1)

    def forward(self, z):
        """Quantize ``z`` (shape ``(..., dim)``); returns a :class:`VQOutput`."""
        if z.shape[-1] != self.dim:
            raise ValueError(f"z must have shape (..., {self.dim}); got {tuple(z.shape)}.")
        dtype = _compute_dtype(z, self.codebook)
        rows = z.reshape(-1, self.dim).to(dtype)
        if self.training:
            self._maintain(rows.detach())
        codebook = self.codebook.to(dtype)
        with torch.no_grad():
            codes = _sq_distances(rows.detach(), codebook.detach()).argmin(1)
        quantized = codebook[codes]
        loss = self.commitment * ((rows - quantized.detach()) ** 2).mean()
        if self.update == "gradient":
            loss = loss + self._codebook_loss(rows.detach(), codebook, quantized)
        if self.training:
            self._train_step(rows.detach(), codes)
        straight = rows + (quantized - rows).detach()
        return VQOutput(straight.reshape(z.shape).to(z.dtype), codes.reshape(z.shape[:-1]), loss)

    def _codebook_loss(self, rows, codebook, quantized):
        if self.assignment == "hard":
            return ((rows - quantized) ** 2).mean()
        sigma = self._sigma(rows, codebook.detach())
        if self.assignment == "softmax":
            return kmeans_loss(rows, codebook, sigma) / self.dim
        return entmax_kmeans_loss(rows, codebook, sigma, self.alpha) / self.dim

