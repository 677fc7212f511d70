"""Request and response headers (Kafka's RequestHeader.json / ResponseHeader.json)."""

from __future__ import annotations

from ..schema import MessageSchema, f

# ClientId keeps its int16 length even in header v2: Kafka marks it flexibleVersions "none" so that
# a broker can read it before knowing whether the API version is flexible.
REQUEST_HEADER = MessageSchema(
    "RequestHeader",
    valid="0-2",
    flexible="2+",
    fields=(
        f("request_api_key", "int16"),
        f("request_api_version", "int16"),
        f("correlation_id", "int32"),
        f("client_id", "string", "1+", nullable="1+", flexible="none", default=None),
    ),
)

RESPONSE_HEADER = MessageSchema(
    "ResponseHeader",
    valid="0-1",
    flexible="1+",
    fields=(f("correlation_id", "int32"),),
)
