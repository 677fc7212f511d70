"""groupd.protocol: the Kafka wire protocol, from bytes to dicts and back.

Owns framing and request/response headers, the declarative schema of every API and version
(``messages/``) compiled into construct codecs (``schema.py``, ``primitives.py``, ``_rt.py``), Kafka's
error codes (``errors.py``), the asyncio server (``server.py``: connections, limits, ordering of
answers) and dispatch (``dispatch.py``: decode, version checks, ApiVersions, calling handlers). It
knows nothing of group semantics, topics or files: handlers are registered from above.
"""
