"""SASL authentication APIs: SaslHandshake, SaslAuthenticate (Kafka's ``Sasl*.json``)."""

from __future__ import annotations

from ..schema import api, f

SASL_HANDSHAKE = api(
    17,
    "SaslHandshake",
    valid="0-1",
    flexible="none",
    request=[
        f("mechanism", "string"),
    ],
    response=[
        f("error_code", "int16"),
        f("mechanisms", "[]string"),
    ],
)

SASL_AUTHENTICATE = api(
    36,
    "SaslAuthenticate",
    valid="0-2",
    flexible="2+",
    request=[
        f("auth_bytes", "bytes"),
    ],
    response=[
        f("error_code", "int16"),
        f("error_message", "string", "0+", nullable="0+"),
        f("auth_bytes", "bytes"),
        f("session_lifetime_ms", "int64", "1+", default=0),
    ],
)
