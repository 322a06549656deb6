"""What every engine shares: a sequence of passes run as one session."""

__all__ = ["PassSession"]


class PassSession:
    """Mixin of the engines: ``with engine:`` around a sequence of passes.

    A fit's iterations run inside it. An engine that needs a process-wide
    setting during its passes applies it once on entering and restores it on
    leaving, instead of once per pass (the numba engine holds BLAS to one
    thread, which costs about 13 us per pass otherwise); the others do
    nothing. Passes outside a session still apply their settings themselves.

    Examples
    --------
    >>> import numpy as np
    >>> from softkmeans._backends._numpy import NumpyEngine
    >>> from softkmeans._core.responsibilities import RelaxationSpec
    >>> X = np.array([[0.0, 0.0], [0.0, 1.0], [5.0, 0.0]])
    >>> with NumpyEngine(X) as engine:
    ...     engine.estep(X[[0, 2]], RelaxationSpec("hard")).labels.tolist()
    [0, 0, 1]
    """

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        """Leave the session; exceptions propagate."""
