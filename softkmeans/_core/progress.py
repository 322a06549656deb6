"""What ``verbose`` prints: the lines a KMeans user reads, with the time since the fit began."""

import time

__all__ = ["Progress"]


class Progress:
    """Prints a fit's progress when ``verbose`` is positive; silent otherwise.

    Every line ends with the seconds elapsed since the object was made (the
    start of the fit), so that a long step (seeding a large data set) shows
    as a gap between two lines.

    Parameters
    ----------
    verbose : int
        Nothing is printed unless it is positive.
    """

    def __init__(self, verbose=0):
        self.verbose = int(verbose)
        self._start = time.perf_counter()

    @classmethod
    def of(cls, verbose):
        """``verbose`` itself if it is a :class:`Progress`, else a new one at that level."""
        return verbose if isinstance(verbose, cls) else cls(verbose)

    def quieter(self):
        """A :class:`Progress` one level less verbose, on the same clock (for inner loops)."""
        inner = Progress(self.verbose - 1)
        inner._start = self._start
        return inner

    def __bool__(self):
        return self.verbose > 0

    def say(self, text):
        """Print ``text`` and the elapsed seconds (when verbose)."""
        if self.verbose > 0:
            print(f"{text} ({time.perf_counter() - self._start:.3f} s)", flush=True)

    def iteration(self, number, stats, spec, step):
        """One iteration: its distortion, objective, temperature and step."""
        if self.verbose > 0:
            sigma = "" if spec.kind == "hard" else f", sigma {spec.sigma:.4g}"
            self.say(f"Iteration {number}: inertia {stats.inertia:.6g}, objective "
                     f"{stats.objective:.6g}{sigma}, step {step:.2e}")
