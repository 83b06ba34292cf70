"""One rule for what is a credential, used wherever fragola_nb shows or writes settings.

Session files, ``repr(Fragola(...))``, ``repr(agent.options)`` and the scripted model's
recorded headers all ask this module; nothing else decides.

>>> is_secret_name("Ocp-Apim-Subscription-Key"), is_secret_name("max_tokens")
(True, False)
>>> redact_text("http://user:hunter2@host/v1?key=AIzaXYZ&alt=sse")
'http://user:[redacted]@host/v1?key=[redacted]&alt=sse'

**Names** (a header, a query parameter, a body field, at any depth). A name is split into
words at ``-``, ``_``, ``.``, spaces and camelCase (``x-goog-api-key`` → x, goog, api, key;
``apiKey`` → api, key). It names a credential when one word

- contains ``key``, ``token``, ``secret``, ``signature``, ``passw``, ``passphrase``,
  ``passcode``, ``subscription``, ``authoriz``, ``authent``, ``cookie``, ``credential`` or
  ``bearer`` (``X-Amz-Security-Token``, ``Private-Token``, ``apikey``, ``Set-Cookie``,
  ``client_secret``, ``Proxy-Authorization``, ``X-Amz-Credential``), or
- is exactly ``sig``, ``auth``, ``pwd``, ``jwt``, ``cred`` or ``creds`` (Azure's ``sig``;
  not ``signal``, ``author``, ``design``, ``credit`` or ``pass_through``).

Exceptions, so that ordinary model settings keep working and round-trip through a session:

- ``tokens`` (plural) is a count or a list of token numbers (``max_tokens``,
  ``max_completion_tokens``, ``budget_tokens``, ``skip_special_tokens`` are kept), except
  after a word that says which credential (``access_tokens``, ``refresh_tokens``,
  ``id_tokens``, ``api_tokens``, ``auth_tokens``, ``session_tokens``, ``bearer_tokens``...).
- ``tokenizer``/``tokenize``, ``detokenize``, ``keyword(s)`` are text, not credentials.
- ``token`` followed by ``id``/``ids`` is a token number: ``stop_token_ids`` is kept.
- ``cache_key`` and ``idempotency_key`` are labels a client chooses, not secrets:
  ``prompt_cache_key`` and ``Idempotency-Key`` are kept.
- The keys of a JSON Schema's ``properties``, ``patternProperties``, ``$defs`` and
  ``definitions`` name fields of the model's reply (``response_format`` may well ask for an
  ``api_key`` field); they are not tested as names (their values still are).

``top_logprobs``, ``logit_bias`` (its keys are token ids), ``safety_identifier``, ``user``,
``metadata``, ``keep_alive``, ``api-version`` contain none of the words and are kept.

**Values** (any string, under any name, in lists too) hold a credential when they contain

- ``Bearer <8 or more token characters>`` (any case);
- ``Basic <base64>`` whose base64 decodes to ``user:password`` (``Basic facts`` is prose);
- a well-known key shape: ``sk-``/``sk_``/``rk_`` and 8 more characters (OpenAI, Anthropic,
  Stripe...), ``ghp_``/``github_pat_``/``glpat-``/``xoxb-``/``hf_``/``gsk_``... and 16 more,
  Google's ``AIza...``, AWS's ``AKIA...``/``ASIA...``, a JSON Web Token ``eyJ….eyJ….``;
- a URL with a password (``scheme://user:password@``) or with a query parameter whose name
  is a credential (``?key=...``, ``&sig=...``).

**Known values.** ``redact_text``, ``redacted``, ``scrub`` and ``redact_exception`` hide the
credentials in use (the client's key, the values of credential headers, query parameters and
body fields a request was sent with: ``credentials_in`` collects them), wherever they appear,
whatever their shape (a server quoting a key back in an error, a 422's ``"input"``): every
credential of :mod:`fragola_nb.base.inuse` (what the model clients of this process use and
send), and those given as ``known``.
A value hides by value only when it cannot be ordinary text: at least 8 characters, not
one plain word of letters (Ollama's documented key ``"ollama"``, a key ``"password"``), and,
under 16 characters, only as a whole word (never inside a longer run of letters and digits).
Its URL-encoded form hides too. Shorter ones still hide where they stand under a credential's
name.

Nothing here looks a value up anywhere: it is text matching, deliberately wide for names
(a dropped header is named in the session file and logged; a leaked one cannot be recalled).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote

from fragola_nb.base.inuse import in_use

__all__ = ["REDACTED", "credentials_in", "hidden", "is_secret_name", "is_secret_value",
           "redact_exception", "redact_text", "redacted", "redacted_texts", "scrub"]

REDACTED = "[redacted]"

_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_FRAGMENTS = re.compile(r"key|token|secret|signature|passw|passphrase|passcode|subscription"
                        r"|authoriz|authent|cookie|credential|bearer")
_WORDS = frozenset({"sig", "auth", "pwd", "jwt", "cred", "creds"})
_NOT_SECRET_WORD = re.compile(r"tokens|tokeni[sz]\w*|detokeni[sz]\w*|keywords?")
_TOKENS_OF = frozenset({
    "access", "refresh", "id", "api", "auth", "oauth", "oauth2", "bearer", "session", "csrf",
    "xsrf", "personal", "client", "security", "service", "device", "identity", "secret",
    "private", "app", "bot", "github", "gitlab", "hf", "slack", "sas", "jwt", "login",
})
"""Words before ``tokens`` that make it credentials (``access_tokens``), not a count."""
_MIN_KNOWN = 8
"""A known value shorter than this is never hidden by value (``"ollama"``)."""
_ANYWHERE = 16
"""A known value this long hides wherever it stands; a shorter one only as a whole word."""
_NOT_SECRET_PAIRS = frozenset({("token", "id"), ("token", "ids"), ("cache", "key"),
                               ("idempotency", "key")})
_SCHEMES = frozenset({"basic", "bearer", "digest", "token", "apikey", "negotiate", "sharedkey"})
_SCHEMA_NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})
"""Keys whose value maps names chosen by a JSON Schema's author, not credentials."""

# Each pattern keeps group 1 (a scheme, "user:") and hides what follows it.
_TOKEN_CHARS = r"[A-Za-z0-9._~+/=-]"
_KEY_SHAPES = [
    re.compile(r"(?i)(\bbearer\s+)" + _TOKEN_CHARS + r"{8,}"),
    re.compile(r"(?<![A-Za-z0-9_-])()(?:sk|rk)[-_][A-Za-z0-9_-]{8,}"),
    re.compile(r"(?<![A-Za-z0-9_-])()(?:ghp|gho|ghu|ghs|ghr|github_pat|glpat|xox[abeoprs]|hf|gsk"
               r"|r8|nvapi|pplx)[-_][A-Za-z0-9_-]{16,}"),
    re.compile(r"(?<![A-Za-z0-9_-])()AIza[0-9A-Za-z_-]{30,}"),
    re.compile(r"(?<![A-Za-z0-9])()(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
    re.compile(r"(?<![A-Za-z0-9_-])()eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
    # A scheme starts after no letter and is at most 40 characters: else each letter of a
    # long run would start a scheme read to the run's end (quadratic on "hahaha...").
    re.compile(r"(?<![A-Za-z])([A-Za-z][A-Za-z0-9+.-]{0,40}://[^/\s?#@:]*:)[^/\s?#@]+(?=@)"),
]
_BASIC = re.compile(r"(?i)(\bbasic\s+)([A-Za-z0-9+/]{4,}={0,2})(?![A-Za-z0-9+/=])")
# A name stops at the next separator, so that each is read once (linear on "?a?a?a...").
_QUERY_PAIR = re.compile(r"([?&;]([^=&#\s?;]+)=)([^&#\s]*)")


def _words(name: str) -> list[str]:
    return [word.lower() for part in _SEPARATORS.split(name)
            for word in _CAMEL.sub(" ", part).split()]


def is_secret_name(name: object) -> bool:
    """True when a header, query parameter or body field called ``name`` holds a credential."""
    if not isinstance(name, str):
        return False
    words = _words(name)
    for index, word in enumerate(words):
        pair = (word, words[index + 1] if index + 1 < len(words) else "")
        before = (words[index - 1] if index else "", word)
        if word == "tokens" and before[0] in _TOKENS_OF:
            return True
        if (_NOT_SECRET_WORD.fullmatch(word) or pair in _NOT_SECRET_PAIRS
                or before in _NOT_SECRET_PAIRS):
            continue
        if word in _WORDS or _FRAGMENTS.search(word):
            return True
    return False


def _basic(match: re.Match[str]) -> str:
    try:
        decoded = base64.b64decode(match.group(2), validate=True)
    except (binascii.Error, ValueError):
        return match.group(0)
    return match.group(1) + REDACTED if b":" in decoded else match.group(0)


def _query(match: re.Match[str]) -> str:
    return match.group(1) + REDACTED if is_secret_name(match.group(2)) else match.group(0)


def _bare(value: str) -> str:
    """A credential without its authorization scheme (``Bearer sk-...`` → ``sk-...``)."""
    value = value.strip()
    scheme, _, rest = value.partition(" ")
    return rest.strip() if rest and scheme.lower() in _SCHEMES else value


def _specific(value: str) -> bool:
    """True when ``value`` cannot be ordinary text: hiding it by value mangles nothing."""
    return len(value) >= _MIN_KNOWN and not value.isalpha()


@functools.lru_cache(maxsize=64)
def _known_pattern(values: frozenset[str]) -> re.Pattern[str] | None:
    forms = sorted({form for value in values for form in (value, quote(value, safe=""))},
                   key=len, reverse=True)
    if not forms:
        return None
    # A long value is hidden wherever it stands (glued to a word too: nothing ordinary is
    # that long and that specific); a shorter one only as a whole word, since inside a longer
    # run of letters and digits it is another word, and cutting it out would mangle it.
    long = "|".join(re.escape(form) for form in forms if len(form) >= _ANYWHERE)
    short = "|".join(re.escape(form) for form in forms if len(form) < _ANYWHERE)
    alternatives = [long] if long else []
    if short:
        alternatives.append(f"(?<![A-Za-z0-9])(?:{short})(?![A-Za-z0-9])")
    return re.compile("|".join(alternatives))


@functools.lru_cache(maxsize=8)
def _hideable(values: frozenset[str]) -> frozenset[str]:
    """The ``values`` that hide by value (see the module's rule), without their scheme."""
    return frozenset(bare for value in values if _specific(bare := _bare(value)))


def _known(known: Iterable[object]) -> re.Pattern[str] | None:
    """The pattern of ``known`` and of every credential in use (:mod:`.inuse`)."""
    values = _hideable(in_use())
    given = frozenset(value for value in known if isinstance(value, str))
    if given:
        values = values | _hideable(given)
    return _known_pattern(values) if values else None


def redact_text(text: str, known: Iterable[object] = ()) -> str:
    """``text`` with every credential in it replaced by ``[redacted]`` (a scheme such as
    ``Bearer`` and a URL's user name are kept, to say what was there): those of a known
    shape, and the ``known`` values in use (see the module's rule for which hide by value).

    >>> redact_text("ollama pull llama3.2 (key my-proxy-key-1)", known=["ollama", "my-proxy-key-1"])
    'ollama pull llama3.2 (key [redacted])'
    """
    return _redact(text, _known(known))


def _redact(text: str, known: re.Pattern[str] | None) -> str:
    if known is not None:
        text = known.sub(REDACTED, text)
    for shape in _KEY_SHAPES:
        text = shape.sub(lambda match: match.group(1) + REDACTED, text)
    text = _BASIC.sub(_basic, text)
    return _QUERY_PAIR.sub(_query, text) if "=" in text else text


def is_secret_value(value: object, known: Iterable[object] = ()) -> bool:
    """True when ``value`` is a string that holds a credential (see the module's rule)."""
    return isinstance(value, str) and redact_text(value, known) != value


_NESTED = (dict, list, tuple)


@functools.lru_cache(maxsize=1024)
def _key_hides(key: str, names: bool) -> bool:
    """Whether the value under ``key`` is a credential (``_walk``'s rule): the key has a
    credential's shape, or, where names count, a credential's name."""
    return _redact(key, None) != key or (names and is_secret_name(key))


def credentials_in(*values: Any) -> set[str]:
    """The credentials that ``values`` (headers, query parameters, request bodies, at any
    depth) hold under a credential's name, without their scheme: the ``known`` values to
    hide wherever a server may quote them back."""
    found: set[str] = set()
    for value in values:
        if value is None:
            continue
        if hasattr(value, "multi_items"):  # httpx's Headers and QueryParams
            value = [{name: item} for name, item in value.multi_items()]
        elif hasattr(value, "items") and not isinstance(value, dict):
            value = dict(value.items())
        _look(value, True, found)
    found.discard("")
    return found


def _collect(item: Any, found: set[str]) -> None:
    if isinstance(item, str):
        found.add(_bare(item))
    elif isinstance(item, dict):
        for inner in item.values():
            _collect(inner, found)
    elif isinstance(item, (list, tuple)):
        for inner in item:
            _collect(inner, found)


def _look(item: Any, names: bool, found: set[str]) -> None:
    """``_walk``'s rule, without rebuilding the value: sent with every request, so cheap."""
    if isinstance(item, dict):
        for key, inner in item.items():
            if isinstance(key, str) and _key_hides(key, names):
                _collect(inner, found)
            elif isinstance(inner, _NESTED):
                _look(inner, key not in _SCHEMA_NAME_MAPS, found)
    elif isinstance(item, (list, tuple)):
        for inner in item:
            if isinstance(inner, _NESTED):
                _look(inner, True, found)


def hidden(value: Any) -> str:
    """What is shown of a value whose name is a credential: ``[redacted]``, after its
    authorization scheme when it has one (``Bearer [redacted]``)."""
    if isinstance(value, str):
        scheme, _, rest = value.strip().partition(" ")
        if rest and scheme.lower() in _SCHEMES:
            return f"{scheme} {REDACTED}"
    return REDACTED


def _walk(value: Any, path: str, on_secret: Callable[[str, Any, bool], Any],
          names: bool = True, *, known: re.Pattern[str] | None) -> Any:
    """``value`` rebuilt, ``on_secret(path, value, named)`` replacing each credential found
    (``named``: found by its name, else by its text, ``known`` values included); ``_DROP``
    drops it."""
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            shown = _redact(key, known) if isinstance(key, str) else key
            where = f"{path}.{shown}" if path else str(shown)
            if shown != key or (names and is_secret_name(key)):
                item = on_secret(where, item, True)
            else:
                item = _walk(item, where, on_secret, key not in _SCHEMA_NAME_MAPS, known=known)
            if item is not _DROP:
                out[shown] = item
        return out
    if isinstance(value, (list, tuple)):
        items = [_walk(item, f"{path}[{index}]", on_secret, known=known)
                 for index, item in enumerate(value)]
        kept = [item for item in items if item is not _DROP]
        return kept if isinstance(value, list) else tuple(kept)
    if isinstance(value, str) and _redact(value, known) != value:
        return on_secret(path, value, False)
    return value


_DROP: Any = object()


def scrub(value: Any, path: str = "", known: Iterable[object] = ()) -> tuple[Any, list[str]]:
    """``value`` without the credentials in it (at any depth), and the paths of what was
    dropped (names only, never values): what session files write. A credential name drops
    its value whole, whatever it holds; a string holding a credential (or a ``known`` value)
    is dropped, from a list too."""
    dropped: list[str] = []

    def drop(where: str, _: Any, named: bool) -> Any:
        dropped.append(where)
        return _DROP

    return _walk(value, path, drop, known=_known(known)), dropped


def redacted(value: Any, known: Iterable[object] = ()) -> Any:
    """``value`` to show (a repr, a log, a recording, a span): the same shape, every
    credential ``[redacted]``, the ``known`` values in use too.

    >>> redacted({"extra_headers": {"Authorization": "Bearer sk-abc12345678"}, "seed": 1})
    {'extra_headers': {'Authorization': 'Bearer [redacted]'}, 'seed': 1}
    """
    pattern = _known(known)
    return _walk(value, "", lambda _, item, named: hidden(item) if named
                 else _redact(item, pattern), known=pattern)


def redacted_texts(value: Any, known: Iterable[object] = ()) -> Any:
    """``value`` with every string in it (at any depth, dict keys too) passed through
    ``redact_text``; names are not looked at, so the shape of a document that must load
    again (a session file, a resume file's row) is kept whole.

    >>> redacted_texts({"tokens": 3, "said": ["my key is sk-abc12345678"]})
    {'tokens': 3, 'said': ['my key is [redacted]']}
    """
    pattern = _known(known)

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return _redact(item, pattern)
        if isinstance(item, dict):
            return {walk(key) if isinstance(key, str) else key: walk(inner)
                    for key, inner in item.items()}
        if isinstance(item, (list, tuple)):
            items = [walk(inner) for inner in item]
            return items if isinstance(item, list) else tuple(items)
        return item

    return walk(value)


_TEXT_ATTRIBUTES = ("message", "body", "doc", "text", "reason", "strerror", "filename",
                    "filename2", "msg")
"""Attributes where exceptions of other libraries keep what a server or a tool said:
``openai``'s ``message`` and ``body``, ``json.JSONDecodeError.doc`` (the whole text that did
not parse), ``OSError``'s ``strerror`` and file names, ``UnicodeError.reason``..."""


def redact_exception(exc: BaseException, known: Iterable[object] = ()) -> BaseException:
    """``exc`` and every exception it chains (cause and context, a suppressed context too,
    the members of an exception group),
    changed in place so that no credential is left in what a traceback prints or their text
    attributes hold: ``args``, ``__notes__`` and the attributes where libraries keep a
    server's words (``message``, ``body``, ``doc``...). Returns ``exc``.

    Why in place and not a copy: an error of ours chains the foreign one it was raised from
    (``raise ModelHTTPError(...) from exc``), and the chain is what ``%tb``, a logged
    traceback and a span's stack trace show; cutting it would hide the frames and the status
    a person needs, keeping it unredacted would print a key a server echoed. A value that
    cannot be set (a read-only attribute, a C type) is left as it is."""
    pattern = _known(known)

    def text(value: Any) -> Any:
        if isinstance(value, str):
            return _redact(value, pattern)
        if isinstance(value, (dict, list, tuple)):
            return _walk(value, "", lambda _, item, named: hidden(item) if named
                         else _redact(item, pattern), known=pattern)
        return value

    seen: list[BaseException] = []
    stack: list[BaseException] = [exc]
    while stack:
        current = stack.pop()
        if any(current is done for done in seen):
            continue
        seen.append(current)
        with contextlib.suppress(Exception):
            current.args = tuple(text(arg) for arg in current.args)
        notes = getattr(current, "__notes__", None)
        if isinstance(notes, list):
            notes[:] = [text(note) for note in notes]
        for name in _TEXT_ATTRIBUTES:
            try:
                value = getattr(current, name, None)
            except Exception:  # a property that raises
                continue
            if isinstance(value, (str, dict, list, tuple)):
                with contextlib.suppress(Exception):
                    setattr(current, name, text(value))
        stack += [link for link in (current.__cause__, current.__context__) if link is not None]
        if isinstance(current, BaseExceptionGroup):  # anyio's task groups (the mcp client)
            stack += list(current.exceptions)
    return exc
