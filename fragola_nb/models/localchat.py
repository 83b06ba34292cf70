"""The chat template ``Fragola.local()`` serves SmolLM2 with.

SmolLM2's own template (in its GGUF file) writes ``message['content']`` as text. An assistant
message that only calls tools has no content, so the template fails and llama.cpp's server
answers HTTP 500 to every request of a history with a tool call; and the calls themselves
never reach the model. This template is the same ChatML prompt, byte for byte, for messages
with text, and it also:

- writes a tool call as ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``;
- writes the text parts of content given as a list of parts;
- ends with ``<|im_start|>assistant\\n`` for the model to answer (llama-cpp-python's
  ``hf-tokenizer-config`` chat format adds an empty assistant message for that).

The server reads it from a ``tokenizer_config.json`` (``--chat_format hf-tokenizer-config
--hf_tokenizer_config_path FILE``), and still grammar-constrains ``response_format`` and a
forced ``tool_choice`` with it.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["SMOLLM2_TEMPLATE", "write_tokenizer_config"]

_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

SMOLLM2_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "{{ '<|im_start|>system\\n" + _SYSTEM + "<|im_end|>\\n' }}"
    "{% endif %}"
    "{% set content = message['content'] if message['content'] is defined"
    " and message['content'] else '' %}"
    "{% if content is not string %}"
    "{% set content = content | map(attribute='text') | select | join('') %}"
    "{% endif %}"
    "{% if loop.last and message['role'] == 'assistant' and not content"
    " and not message['tool_calls'] %}"
    "{{ '<|im_start|>assistant\\n' }}"
    "{% else %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + content }}"
    "{% for call in (message['tool_calls'] or []) %}"
    "{{ '<tool_call>{\"name\": \"' + call['function']['name'] + '\", \"arguments\": '"
    " + call['function']['arguments'] + '}</tool_call>' }}"
    "{% endfor %}"
    "{{ '<|im_end|>\\n' }}"
    "{% endif %}"
    "{% endfor %}"
)


def write_tokenizer_config(directory: Path) -> Path:
    """Write ``tokenizer_config.json`` with :data:`SMOLLM2_TEMPLATE` into ``directory``."""
    path = directory / "tokenizer_config.json"
    config = {"chat_template": SMOLLM2_TEMPLATE, "bos_token": "<|im_start|>",
              "eos_token": "<|im_end|>"}
    path.write_text(json.dumps(config), encoding="utf-8")
    return path
