"""The public surface: what ``fragola_nb`` exports, what importing it loads, what it shows."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from typing import Any

import pydantic
import pytest

import fragola_nb
from fragola_nb import Fragola, tool
from fragola_nb.models.scripted import ScriptedModel, call, fail, reply, tool_calls

# Names the package module holds that are not part of what users import.
NOT_EXPORTED = {
    "annotations",  # from __future__ import annotations
    "load_ipython_extension",  # the IPython extension protocol, called by %load_ext
    "unload_ipython_extension",
}


def isort_key(name: str) -> tuple[int, str]:
    """The order ``ruff``'s RUF022 keeps ``__all__`` in: CONSTANTS, then Classes, then the
    rest, each group sorted case-sensitively."""
    if name.isupper():
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def test_all_is_sorted() -> None:
    assert fragola_nb.__all__ == sorted(fragola_nb.__all__, key=isort_key)
    assert len(set(fragola_nb.__all__)) == len(fragola_nb.__all__)


def test_all_equals_the_public_names_of_the_package() -> None:
    public = {
        name
        for name in dir(fragola_nb)  # the names imported on first use included
        if not name.startswith("_")
        and not isinstance(getattr(fragola_nb, name), types.ModuleType)  # submodules
        and name not in NOT_EXPORTED
    }

    assert set(fragola_nb.__all__) == public


def test_every_exported_name_is_defined_in_the_package() -> None:
    for name in fragola_nb.__all__:
        value = getattr(fragola_nb, name)
        module = getattr(value, "__module__", "fragola_nb")
        assert module.startswith("fragola_nb"), f"{name} comes from {module}"


def test_importing_the_core_loads_no_jupyter_module() -> None:
    script = (
        "import sys, json, fragola_nb, fragola_nb.models.scripted;"
        "print(json.dumps(sorted(m for m in sys.modules"
        " if m.split('.')[0] in ('IPython', 'ipywidgets', 'traitlets', 'ipykernel')"
        " or m == 'fragola_nb.notebook')))"
    )

    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            check=True, timeout=60)

    assert json.loads(result.stdout) == []


# What ``import fragola_nb`` leaves for the first call that needs it (bench/import_time.py:
# together they cost about as much as all of fragola_nb's own modules). A module set, not a
# timing: a new eager import of one of them fails here whatever the machine's speed.
LAZY_MODULES = (
    "fragola_nb.sessions",  # save/load_session, the exports and their Markdown/HTML writers
    "fragola_nb.base.render",  # the HTML and text views of a conversation
    "fragola_nb.core.jsonmode",  # agent.json and JsonResult
    "fragola_nb.models.scripted",  # Fragola.scripted / from_env without a key
    "pydantic.v1",  # only a v1 model needs it, and whoever made one imported it
    "openai.resources",  # create()'s signature, read when settings are first checked
    "jsonschema",  # raw JSON Schemas
    "markdown_it",  # Markdown in panels and exports
    "fragola_nb.presets.orchestration",  # orchestrate(): agents messaging each other
    "fragola_nb.presets.guardrails",  # guardrail(): checks on what enters an agent
    "fragola_nb.presets.tracing",  # instrument(): OpenTelemetry spans, the otel extra
    "fragola_nb.presets.mcptools",  # mcp_tools(): an MCP server's tools, the mcp extra
    "mcp",
    "opentelemetry",
    "fragola_nb.experiments.ray.backend",  # agent.batch(backend="ray"), the ray extra
    "ray",
    "scipy",  # an evaluation's intervals and paired tests (experiments/evaluate/)
    "numpy",  # scipy's, imported with it
)


def loaded_by(code: str) -> set[str]:
    script = f"import sys, json; {code}; print(json.dumps(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            check=True, timeout=60)
    return set(json.loads(result.stdout))


def test_importing_fragola_nb_leaves_sessions_json_mode_and_heavy_libraries_for_later() -> None:
    loaded = loaded_by("import fragola_nb")

    early = sorted(m for m in loaded
                   if any(m == lazy or m.startswith(lazy + ".") for lazy in LAZY_MODULES))
    assert early == []


def test_the_names_imported_on_first_use_work() -> None:
    loaded = loaded_by("from fragola_nb import save_session, export_html, JsonResult")

    assert {"fragola_nb.sessions", "fragola_nb.core.jsonmode"} <= loaded
    assert fragola_nb.save_session is fragola_nb.sessions.save_session
    assert "load_session" in dir(fragola_nb)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        fragola_nb.nope  # noqa: B018


# -- no secret in what the objects show -----------------------------------------------------

SECRET = "sk-test-SECRET-123"


class City(pydantic.BaseModel):
    name: str


async def test_the_api_key_appears_in_no_repr_or_str(model: ScriptedModel) -> None:
    weather = tool(name="weather", description="Weather.", schema=City,
                   handler=lambda params: f"Sunny in {params.name}")
    model.push(tool_calls(call("weather", {"name": "Paris"})), reply("Sunny."), fail(401))
    fragola = Fragola(api_key=SECRET, base_url=model.base_url, max_retries=0)
    agent = fragola.agent(name="a", instructions="Be brief.", tools=[weather])
    contexts: list[Any] = []
    agent.on_tool_call(lambda event: contexts.append(event.context))
    await agent.user_message("Weather in Paris?")
    error: BaseException | None = None
    try:
        await agent.user_message("again")
    except fragola_nb.ModelHTTPError as exc:
        error = exc
    assert error is not None

    shown = [
        fragola, agent, agent.state, agent.context, contexts[0], weather, agent.options,
        fragola._model, error, error.__cause__,
    ]
    for value in shown:
        for text in (repr(value), str(value)):
            assert SECRET not in text, f"the key leaks through {type(value).__name__}"
    assert SECRET not in str(agent.state.messages)
    assert SECRET not in json.dumps(model.requests)
