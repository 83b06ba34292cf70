# %% active="py"
# The source of ../json_and_streaming.ipynb: ../build.py writes the notebook from it.
# A cell marked active="py", such as this one, is not in the notebook: it is for ruff and mypy.
# Right in a notebook, not in a module:
# - await at the top level (F704);
# - a cell's last expression is its output (B018);
# - cells import as they go (E402).
# ruff: noqa: B018, E402, F704

# %% [markdown]
# # JSON mode and streaming
#
# Two ways to get an answer out of a model besides plain text: **structured JSON** that
# matches a schema (checked for you), and a **stream** of tokens as they are written.
# Then the `%%fragola` options for both, and `{var}` in a cell's text.
#
# Runs offline on the scripted demo model when `OPENAI_API_KEY` is not set: it fills any
# JSON schema with the numbers and quoted names it finds in your message, and streams its
# replies in small chunks.

# %%
# %load_ext fragola_nb

# %%
from pydantic import BaseModel

from fragola_nb import Fragola, JsonModeError

fragola = Fragola.from_env()
extractor = fragola.agent(name="extractor", instructions="Extract the facts the user gives.")


# %% [markdown]
# ## 1. JSON with a pydantic model
#
# `await agent.json(message, Model)` asks for a reply that matches the model (OpenAI's
# structured outputs, strict) and checks it. It returns a `JsonResult`: `success`, `data`
# (a `Model` instance), `error`, and `state` (the agent's state after the turn).

# %%
class Contact(BaseModel):
    name: str
    email: str
    age: int


message = 'New contact: "Ada Lovelace", 36 years old, email "ada@example.com".'
result = await extractor.json(message, Contact)
print("success:", result.success)
result.data

# %%
assert result.success and isinstance(result.data, Contact)
print(result.data.name, "is", result.data.age)
print("the reply as stored:", extractor.state.messages[-1]["content"])

# %% [markdown]
# The exchange stays in the history like any other turn, so a follow-up question can refer
# to it.
#
# ## 2. JSON with a JSON Schema
#
# A JSON Schema (a dict or a string) works the same way; it is checked with `jsonschema`
# and `data` is a plain dict.

# %%
book_schema = {
    "title": "book",
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "year": {"type": "integer", "minimum": 1450},
    },
    "required": ["title", "year"],
    "additionalProperties": False,
}

message = 'The book "Structure and Interpretation of Computer Programs" came out in 1985.'
result = await extractor.json(message, book_schema)
assert result.success and result.data["year"] == 1985
result.data

# %% [markdown]
# ## 3. When the reply does not fit
#
# Two different failures, shown with a model scripted to get it wrong:
#
# - JSON that does **not match** the schema: no exception; `success` is false and `error`
#   says why (you decide what to do: ask again, fix it, give up);
# - **no JSON at all** (or the API fails): `JsonModeError` is raised.

# %%
from fragola_nb.testing import reply

sloppy = Fragola.scripted([
    reply('{"name": "Ada", "email": "ada@example.com"}'),  # "age" is missing
    reply("Sorry, I would rather answer in prose."),
])
checker = sloppy.agent(name="checker")

result = await checker.json("Who is Ada?", Contact)
print("success:", result.success)
print(result.error)
assert not result.success and result.data is None

# %%
try:
    await checker.json("And who is Grace?", Contact)
except JsonModeError as exc:
    print("JsonModeError:", exc)
assert checker.state.status == "idle"  # the agent is still usable

# %% [markdown]
# ## 4. JSON from a cell: `%%fragola --json`
#
# `--json NAME` takes a pydantic model or a JSON Schema from the notebook; the cell shows
# the turn's panel, then the data. `--out VAR` binds the `JsonResult` to a variable.

# %% active="ipynb"
# %%fragola extractor --json Contact --out contact
# New contact: "Grace Hopper", 85 years old, email "grace@example.com".

# %% active="py"
# What the %%fragola cell above binds, in Python (for ruff and mypy; never run).
from fragola_nb import JsonResult

contact: JsonResult[Contact] = await extractor.json(
    'New contact: "Grace Hopper", 85 years old, email "grace@example.com".', Contact)

# %%
assert contact.success and contact.data.name == "Grace Hopper"
contact.data.model_dump()

# %% [markdown]
# ## 5. Servers without structured outputs: `json_mode`
#
# Local servers (llama.cpp, LM Studio, Ollama, vLLM) do not all accept OpenAI's structured
# outputs. `agent.json` has three ways to ask, chosen with `json_mode` (on the `Fragola`,
# or for one call, or `%%fragola --json-mode`):
#
# - `"json_schema"`: structured outputs;
# - `"json_object"`: JSON mode with the schema in llama.cpp's `schema` field and in the
#   request's instructions;
# - `"tool"`: a forced call of one tool whose parameters are the schema.
#
# The default, `"auto"`, starts with `json_schema`; when a server refuses it, the same turn
# goes on with the next strategy, and the `Fragola` remembers what worked for that model.
# Here the scripted model refuses `json_schema` the way llama-cpp-python's server does
# (HTTP 500, with its validation error naming `response_format`):

# %%
like_llama_cpp = Fragola.scripted(refuse={"json_schema"})
clerk = like_llama_cpp.agent(name="clerk")

result = await clerk.json(
    'New contact: "Alan Turing", 41 years old, email "alan@example.com".', Contact)
print("strategy:", result.json_mode, "| remembered:", like_llama_cpp.json_modes)
assert result.success and result.json_mode == "json_object"
sent = like_llama_cpp.scripted_model.requests
print("requests:", [r["response_format"]["type"] for r in sent])
result.data

# %% [markdown]
# The user message was stored once, and the agent's instructions are unchanged: the schema
# note went in the request only. With `"tool"`, the answer is a tool call, answered in the
# history so the next turn is a valid request:

# %%
result = await clerk.json('"Grace Hopper", 85, "grace@example.com"', Contact,
                          json_mode="tool")
assert result.success and result.json_mode == "tool"
for message in clerk.state.messages[-3:]:
    print(message["role"], "->", message.get("tool_calls") or message.get("content"))

# %% [markdown]
# ## 6. Streaming
#
# With `model_settings={"stream": True}` the reply arrives in chunks. Each chunk fires a
# `model_chunk` event with `event.content` (the new text) and `event.message` (the reply
# so far). The stored message is the same as without streaming.
#
# The demo model sends 4-character chunks at once; slow it down to watch them arrive.

# %%
storyteller = fragola.agent(name="storyteller", model_settings={"stream": True})
if fragola.offline:
    fragola.scripted_model.chunk_delay = 0.03  # seconds between chunks: watch them arrive

chunks = []


def print_tokens(event):
    chunks.append(event.content)
    print(event.content, end="", flush=True)


unsubscribe = storyteller.on_model_chunk(print_tokens)
state = await storyteller.user_message("Tell me a short story about a fox.")
unsubscribe()

print(f"\n\n{len(chunks)} chunks")
assert "".join(chunks) == state.messages[-1]["content"]

# %% [markdown]
# ## 7. `%%fragola` streams by default
#
# The panel shows the reply growing as it streams (updates are batched, so a long reply
# does not flood the browser). `--no-stream` asks for the whole reply at once; like
# `--model M` and `--temperature T`, it is a setting **for this turn only**, never saved
# on the agent.
#
# A listener on `after_model_invocation` shows the settings each request was sent with.

# %%
sent = []
settings_log = extractor.on_after_model_invocation(lambda event: sent.append(event.config))

# %% active="ipynb"
# %%fragola extractor --temperature 0.2
# Now tell me a short story about a crow.

# %% active="ipynb"
# %%fragola extractor --no-stream
# One more, all at once.

# %%
for config in sent:
    print({key: config.get(key) for key in ("model", "stream", "temperature")})
settings_log()
assert sent[0]["stream"] is True and sent[0]["temperature"] == 0.2
assert "stream" not in sent[1] and "temperature" not in sent[1]
assert "stream" not in extractor.options.model_settings

# %% [markdown]
# ## 8. `{var}` in a cell
#
# `{name}` and `{name.attr}` in a `%%fragola` cell (its text and its line) are replaced by
# values from the notebook. `{{name}}` gives a literal `{name}`; any other brace, like
# JSON, is left alone. An unknown name is a one-line error, and nothing is sent.

# %%
from types import SimpleNamespace

city = "Lyon"
trip = SimpleNamespace(days=3, season="spring")

# %% active="ipynb"
# %%fragola storyteller
# Write a postcard from {city} after {trip.days} days in {trip.season}.
# Keep these as typed: {{city}} and {"sunny": true}.

# %%
sent_text = storyteller.state.messages[-2]["content"]
print(sent_text)
assert "from Lyon after 3 days in spring" in sent_text
assert '{city} and {"sunny": true}' in sent_text
