"""Kafka wire protocol: codec, framing, headers, error codes and the asyncio server."""
