import pytest
from _helpers import make_mixture


@pytest.fixture
def blobs():
    return make_mixture()
