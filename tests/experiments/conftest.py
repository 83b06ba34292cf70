"""Fixtures of the experiments' tests: the local Ray instance the Ray tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def ray_instance() -> Iterator[None]:
    """One local Ray instance with 2 CPUs for the module, as CI's machine has. Ray is a
    required component: a module that uses it fails, never skips, without it."""
    import ray

    from fragola_nb import RayBackend
    from fragola_nb.experiments.ray.connect import connect

    assert not ray.is_initialized()
    # Through the backend's own start (it tries once more when Ray's raylet misses its
    # start-up deadline on a busy machine, a known Ray bug). Nothing more: the test sees
    # the node address and dashboard the backend chooses.
    connect(ray, RayBackend(init={"num_cpus": 2, "object_store_memory": 100 * 1024 * 1024}))
    assert ray.cluster_resources()["CPU"] == 2
    yield
    ray.shutdown()
