"""``verify_signature`` runs on a request's headers, which its sender chose: whatever they
hold, it answers True or False (a receiver built on it never answers 500 to a forgery)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neuralmind.client import verify_signature, webhook_signature

SECRET, BODY = "whsec_example", b'{"id":1}'


def headers(timestamp: str, signature: str) -> dict[str, str]:
    return {"NeuralMind-Timestamp": timestamp, "NeuralMind-Signature": signature}


def test_a_genuine_signature_among_others_is_true():
    now = str(int(time.time()))
    signed = webhook_signature(SECRET, now, BODY)
    assert verify_signature(SECRET, BODY, headers(now, f"sha256=00, {signed}"))
    assert not verify_signature(SECRET, BODY + b" ", headers(now, signed))


@pytest.mark.parametrize("timestamp, signature", [
    ("now", "sha256=\u00e9"),                  # not ASCII: compare_digest would raise
    ("\u00b2", "sha256=00"),                   # a digit to str.isdigit, not to int()
    ("\u0663" * 10, "sha256=00"),              # Arabic-Indic digits
    ("9" * 5000, "sha256=00"),                 # past int()'s digit limit
], ids=["non-ascii signature", "superscript digit", "arabic-indic digits", "5000 digits"])
def test_crafted_headers_are_false(timestamp, signature):
    timestamp = str(int(time.time())) if timestamp == "now" else timestamp
    assert verify_signature(SECRET, BODY, headers(timestamp, signature)) is False


@given(st.text(), st.text())
def test_any_headers_are_true_or_false(timestamp, signature):
    assert verify_signature(SECRET, BODY, headers(timestamp, signature)) is False


def test_no_headers_are_false_and_a_secret_or_body_of_the_wrong_type_is_named():
    assert verify_signature(SECRET, BODY, None) is False
    for secret, body in ((None, BODY), (SECRET, "text, not the bytes received")):
        with pytest.raises(TypeError, match=r"the secret is text \(whsec_…\) and the body the "
                                            r"raw bytes received"):
            verify_signature(secret, body, {})
