"""Issue 32, class 2: redaction is linear in its text. Each input is 1 MB of a shape that
made a key-shape pattern backtrack over the whole run from each of its letters (quadratic:
100,000 letters took 18-34 s); the results are checked, and a key inside the run still hides.
(A timing bench: bench/redaction_speed.py.)"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fragola_nb.base.inuse import remember
from fragola_nb.base.redact import REDACTED, redact_text, redacted, redacted_texts

MB = 1_000_000
KNOWN = "corp-gw-9Lk2Rv7Qx4Ts"  # no well-known shape: only the credentials in use hide it


@pytest.mark.parametrize(("text", "kept"), [
    ("ha" * (MB // 2), True),
    ("a" * MB, True),
    ("aB1." * (MB // 4), True),
    ("?a" * (MB // 2) + " =", True),
    (";a" * (MB // 2) + " =", True),
    ("x://" * (MB // 4), True),
    ("a://b:" * (MB // 6), True),
    ("a1" * (MB // 2), True),
    ("1x" * (MB // 4) + "://" + "a:" * (MB // 4), True),
    ("bearer " * (MB // 7), True),
    ("eyJ" * (MB // 3), True),
    ("basic " + "a" * MB + "===", True),
    ("sk-" + "a" * MB, False),
    ("sk-" * (MB // 3), False),
])
def test_a_megabyte_of_a_backtracking_shape_is_redacted_as_before(text: str, kept: bool
                                                                   ) -> None:
    assert (redact_text(text) == text) is kept
    if not kept:
        assert redact_text(text) == REDACTED


def test_a_key_in_a_megabyte_of_runs_hides_and_the_runs_stay() -> None:
    remember([KNOWN])
    run = "ha" * (MB // 8)
    text = (f"{run} sk-proj-abcdefgh12345 {run} 1https://user:hunter2@host/x {run} "
            f"{KNOWN} {run}?key=AIzaXYZ&alt=sse {run}")
    shown = redact_text(text)
    assert shown == (f"{run} {REDACTED} {run} 1https://user:{REDACTED}@host/x {run} "
                     f"{REDACTED} {run}?key={REDACTED}&alt=sse {run}")
    # The same through the walkers every writer uses.
    assert redacted({"reason": text})["reason"] == shown
    assert redacted_texts([text]) == [shown]


_TOKEN = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _run(size: int, alphabet: str = _TOKEN + "_-") -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=size, max_size=size + 30)


KEYS = st.one_of(
    st.builds("sk-{}".format, _run(8)),
    st.builds("rk_{}".format, _run(8)),
    st.builds("ghp_{}".format, _run(16)),
    st.builds("github_pat_{}".format, _run(16)),
    st.builds("xoxb-{}".format, _run(16)),
    st.builds("hf_{}".format, _run(16)),
    st.builds("AIza{}".format, _run(30)),
    st.builds("AKIA{}".format, st.text(alphabet=_TOKEN[:26] + _TOKEN[52:], min_size=16,
                                       max_size=16)),
    st.builds("eyJ{}.eyJ{}.{}".format, _run(8), _run(8), _run(0)),
)
AROUND = st.text(alphabet=" \n.,:;!()haHA", max_size=200)


@settings(max_examples=300, deadline=None)
@given(key=KEYS, before=AROUND, after=AROUND)
def test_every_key_shape_hidden_before_is_hidden_in_any_text_around_it(
        key: str, before: str, after: str) -> None:
    # A separator on each side, as a key stands in text (not glued to a word).
    text = f"{before} {key} {after}"
    shown = redact_text(text)
    assert key not in shown and REDACTED in shown
    assert redact_text(shown) == shown


@settings(max_examples=200, deadline=None)
@given(token=_run(8, _TOKEN + "._~+/="), password=_run(1, _TOKEN), before=AROUND)
def test_a_bearer_token_and_a_urls_password_are_hidden(token: str, password: str,
                                                        before: str) -> None:
    shown = redact_text(f"{before} Authorization: Bearer {token} https://me:{password}@h/")
    assert shown.endswith(f"Authorization: Bearer {REDACTED} https://me:{REDACTED}@h/")
