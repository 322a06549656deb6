"""What every experiment family shares: the configuration, the paired
initializations and reference configurations of a dataset, summaries, progress."""

import sys
import time
from dataclasses import dataclass, field, replace

import numpy as np
from sklearn.cluster import kmeans_plusplus

from .._core.optimize import alternating, weighted_means
from .._core.responsibilities import HARD
from .._engines import get_engine
from ..datasets import DATASETS, load

__all__ = ["Config", "Context", "prepare", "Progress", "median_iqr", "percent", "fit_slope",
           "fmt", "nanmedian"]


@dataclass(frozen=True)
class Config:
    """Sizes of one reproduction. :meth:`full` uses the paper's sizes.

    Attributes
    ----------
    n_init : int
        Paired k-means++ initializations per dataset (the paper's M).
    max_iter : int
        Iteration cap of every run (the paper's T).
    tol : float
        Relative step of the stopping rule (the paper's eps_mu).
    datasets : tuple of str
        Names from :data:`softkmeans.datasets.DATASETS`.
    seed : int
        Seed of the synthetic data and of the initializations.
    betas : tuple of float
        Grid of beta = Delta_min / (2 sigma^2) at the reference configurations.
    alphas, sigma_ratios : tuple of float
        Entmax orders and values of sigma / sigma_id(alpha) of the sharpness test.
    beta_tildes : tuple of float
        Temperatures of Sec. 7.7 relative to the dataset's median margin.
    dynamics_beta_tilde : float
        Temperature of Sec. 7.6.
    c_values : tuple of float
        sigma / sigma* of the edge test of Thm 25.
    n_temperatures : int
        Length of the annealing schedule of Sec. 7.8.
    n_first_temperature : int
        Initializations used to study the first annealing temperature alone.
    path_sigmas : tuple of float
        ``(start, stop, count)`` of the annealing paths on the planar datasets.
    n_timing_repeats : int
        Repeats of each timed Lloyd run (its time is small).
    """

    n_init: int = 200
    max_iter: int = 150
    tol: float = 1e-6
    datasets: tuple = tuple(DATASETS)
    seed: int = 0
    betas: tuple = tuple(np.geomspace(0.25, 64.0, 24))
    alphas: tuple = (1.25, 1.5, 2.0, 3.0)
    sigma_ratios: tuple = (0.5, 0.9, 0.99, 0.999, 1.001, 1.01, 1.1, 2.0)
    beta_tildes: tuple = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
    dynamics_beta_tilde: float = 4.0
    c_values: tuple = (0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)
    n_temperatures: int = 40
    n_first_temperature: int = 20
    path_sigmas: tuple = (2.0, 0.02, 22)
    n_timing_repeats: int = 3

    def __post_init__(self):
        counts = {"n_init": self.n_init, "max_iter": self.max_iter,
                  "n_temperatures": self.n_temperatures,
                  "n_first_temperature": self.n_first_temperature,
                  "n_timing_repeats": self.n_timing_repeats}
        for name, value in counts.items():
            if not (isinstance(value, (int, np.integer)) and value >= 1):
                raise ValueError(f"{name} must be a positive integer; got {value!r}.")
        if not self.tol >= 0:
            raise ValueError(f"tol must be non-negative; got {self.tol!r}.")
        if not (isinstance(self.seed, (int, np.integer)) and 0 <= self.seed < 2**32):
            raise ValueError(f"seed must be an integer in [0, 2**32); got {self.seed!r}.")
        unknown = [name for name in self.datasets if name not in DATASETS]
        if unknown or not self.datasets:
            raise ValueError(f"datasets must be some of {list(DATASETS)}; got "
                             f"{list(self.datasets)!r}.")
        repeated = sorted({name for name in self.datasets if self.datasets.count(name) > 1})
        if repeated:
            raise ValueError(f"datasets lists {', '.join(repeated)} more than once.")

    @classmethod
    def full(cls, **changes):
        """The paper's sizes: M = 200, T = 150, 40 annealing temperatures."""
        return replace(cls(), **changes)

    @property
    def mode(self):
        """``"quick"`` or ``"full"`` when the sizes are those of :meth:`quick` or :meth:`full`
        (whatever the datasets, seed and M), else ``"custom"``."""
        kept = {"n_init": self.n_init, "datasets": self.datasets, "seed": self.seed}
        for name in ("quick", "full"):
            if self == getattr(type(self), name)(**kept):
                return name
        return "custom"

    @classmethod
    def quick(cls, **changes):
        """Fewer initializations and temperatures (minutes on a laptop)."""
        base = cls(n_init=8, betas=tuple(np.geomspace(0.25, 64.0, 12)), n_temperatures=16,
                   n_first_temperature=4, beta_tildes=(0.5, 2.0, 8.0, 32.0),
                   c_values=(0.5, 1.0, 2.0, 5.0, 10.0), n_timing_repeats=1)
        return replace(base, **changes)


@dataclass
class Context:
    """One dataset, its paired initializations and its reference configurations.

    The reference configuration of initialization ``m`` is the Lloyd fixed point
    reached from it (its path is recorded); it is admissible when its margin is
    positive and no cluster is empty.
    """

    name: str
    X: np.ndarray
    k: int
    engine: object
    inits: list
    lloyd: list
    admissible: np.ndarray
    margin_min: np.ndarray
    lam_max: float | None = None
    extra: dict = field(default_factory=dict)

    @property
    def n(self):
        return self.X.shape[0]

    @property
    def median_margin(self):
        """The paper's tilde-Delta_min: median margin over admissible references."""
        return float(np.median(self.margin_min[self.admissible]))

    def admissible_runs(self):
        """Indices of the admissible initializations."""
        return np.flatnonzero(self.admissible)

    def lloyd_means(self, m):
        """``T_Lloyd`` at the reference configuration ``m`` (its cluster means)."""
        return weighted_means(self.lloyd[m].stats, self.lloyd[m].centers)


def prepare(name, config, backend="numpy"):
    """Load ``name``, draw its paired initializations and run Lloyd from each."""
    X, k = load(name, random_state=config.seed)
    engine = get_engine(backend, X)
    seeds = np.random.RandomState(config.seed).randint(np.iinfo(np.int32).max,
                                                       size=config.n_init)
    inits = [kmeans_plusplus(X, k, random_state=int(s))[0] for s in seeds]
    lloyd = [alternating(engine, c, HARD, max_iter=config.max_iter, tol=config.tol,
                         record_path="centers") for c in inits]
    margin_min = np.array([run.stats.margins.min() for run in lloyd])
    nonempty = np.array([run.stats.masses.min() > 0 for run in lloyd])
    return Context(name, X, k, engine, inits, lloyd, (margin_min > 0) & nonempty, margin_min)


class Progress:
    """A plain-text progress bar on stderr (one line per update on a terminal)."""

    def __init__(self, total, label, enabled=True, stream=None, width=30):
        self.total, self.label, self.enabled = max(int(total), 1), label, enabled
        self.stream = stream or sys.stderr
        self.width, self.done, self.start = width, 0, time.perf_counter()
        self._last = -1

    def update(self, step=1, note=""):
        self.done += step
        if not self.enabled:
            return
        frac = min(self.done / self.total, 1.0)
        tick = int(frac * 20)
        tty = getattr(self.stream, "isatty", lambda: False)()
        if not tty and tick == self._last and self.done < self.total:
            return
        self._last = tick
        elapsed = time.perf_counter() - self.start
        eta = elapsed / frac - elapsed if frac > 0 else float("nan")
        bar = "#" * int(frac * self.width)
        line = (f"[{self.label}] |{bar:<{self.width}}| {self.done}/{self.total} "
                f"{elapsed:6.0f}s elapsed, {eta:6.0f}s left {note}")
        self.stream.write(("\r" if tty else "") + line + ("" if tty else "\n"))
        if tty and self.done >= self.total:
            self.stream.write("\n")
        self.stream.flush()


def fit_slope(x, y):
    """Least-squares slope of ``y`` against ``x`` (nan with fewer than 3 points)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.size < 3:
        return np.nan
    return float(np.polyfit(x, y, 1)[0])


def median_iqr(values, digits=3):
    """``"median [q1, q3]"`` of the finite values (``"-"`` when there are none)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return "-"
    q1, med, q3 = np.percentile(v, [25, 50, 75])
    return f"{fmt(med, digits)} [{fmt(q1, digits)}, {fmt(q3, digits)}]"


def nanmedian(values):
    """Median of the finite values, nan (without a warning) when there are none."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return float(np.median(v)) if v.size else float("nan")


def percent(flags):
    """Percentage of True values (nan for an empty list)."""
    flags = np.asarray(flags, dtype=bool)
    return float(100.0 * flags.mean()) if flags.size else float("nan")


def fmt(value, digits=3):
    """Compact number formatting for the report."""
    if value is None:
        return "-"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    value = float(value)
    if value == 0:
        return "0"
    if not np.isfinite(value):
        return "inf" if value > 0 else ("-inf" if value < 0 else "-")
    if value != 0 and (abs(value) < 10.0 ** -(digits - 1) or abs(value) >= 1e5):
        return f"{value:.{max(digits - 1, 1)}e}"
    return f"{value:.{digits}g}" if abs(value) >= 1 else f"{value:.{digits}f}"
