"""Issue 21 E: the GenAI client metrics, read back with the SDK's ``InMemoryMetricReader``.

Model calls go through the real ``openai`` client to the scripted model (usage reported) or to
a loopback API that refuses the key (a 401): ``gen_ai.client.operation.duration`` for each
call (``error.type`` on the failed one), ``gen_ai.client.token.usage`` per token type.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from support.echo_api import KEY, EchoAPI, rejecting_key
from support.helpers import make_agent, model_error

from fragola_nb import BadUsage, Fragola
from fragola_nb.models.scripted import ScriptedModel, reply
from fragola_nb.presets.tracing import instrument, uninstrument


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    found = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[found])
    instrument(meter_provider=provider)
    try:
        yield found
    finally:
        uninstrument()
        provider.shutdown()


def metrics_of(reader: InMemoryMetricReader) -> dict[str, tuple[str, list[HistogramDataPoint]]]:
    """name -> (unit, data points) of what fragola_nb recorded."""
    data = reader.get_metrics_data()
    assert data is not None
    found: dict[str, tuple[str, list[HistogramDataPoint]]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            assert scope.scope.name == "fragola_nb"
            for metric in scope.metrics:
                points = list(metric.data.data_points)  # type: ignore[union-attr]
                found[metric.name] = (metric.unit or "", points)  # type: ignore[assignment]
    return found


async def test_a_model_call_records_its_duration_and_tokens_by_type(
        reader: InMemoryMetricReader, model: ScriptedModel) -> None:
    agent = make_agent(model)
    model.push(reply("four"))
    await agent.user_message("2 + 2?")
    usage = agent.usage.calls[0]

    found = metrics_of(reader)
    unit, [duration] = found["gen_ai.client.operation.duration"]
    assert unit == "s" and duration.count == 1 and 0 < duration.sum < 30
    attributes = dict(duration.attributes or {})
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == attributes["gen_ai.system"] == "openai"
    assert attributes["gen_ai.request.model"] == agent.model
    assert attributes["server.address"] == "127.0.0.1"
    assert "error.type" not in attributes
    assert list(duration.explicit_bounds)[:3] == [0.01, 0.02, 0.04]  # the advised buckets

    unit, points = found["gen_ai.client.token.usage"]
    assert unit == "{token}"
    by_type = {dict(p.attributes or {})["gen_ai.token.type"]: p for p in points}
    assert set(by_type) == {"input", "output"}
    assert by_type["input"].sum == usage.prompt_tokens > 0
    assert by_type["output"].sum == usage.completion_tokens > 0
    assert dict(by_type["input"].attributes or {})["gen_ai.operation.name"] == "chat"


async def test_a_failed_call_records_its_duration_with_error_type_and_no_key(
        reader: InMemoryMetricReader) -> None:
    api = EchoAPI(rejecting_key)
    fragola = Fragola(api_key=KEY, base_url=api.base_url, model="m", max_retries=0)
    await model_error(fragola.agent(name="a"), "hi", fragola, api)

    found = metrics_of(reader)
    _, [duration] = found["gen_ai.client.operation.duration"]
    attributes: dict[str, Any] = dict(duration.attributes or {})
    assert duration.count == 1
    assert attributes["error.type"] == "ModelHTTPError"
    assert attributes["gen_ai.request.model"] == "m"
    assert "gen_ai.client.token.usage" not in found  # no usage was reported
    assert KEY not in repr(attributes)


def test_instrument_refuses_what_is_not_a_meter_provider() -> None:
    with pytest.raises(BadUsage, match="meter_provider must be an OpenTelemetry MeterProvider"):
        instrument(meter_provider=object())  # type: ignore[arg-type]
