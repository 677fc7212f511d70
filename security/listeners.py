"""Listeners: where groupd accepts connections and what security each one demands.

Kafka-style: ``--listeners "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093"``. A listener's
name is its security protocol, or a name of one's own mapped to a protocol by
``--listener-security-protocol-map`` (Kafka's ``listener.security.protocol.map``), so that one
protocol can serve two listeners, e.g. an internal and an external PLAINTEXT listener of a container:
``--listeners INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:19092 --listener-security-protocol-map
INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT --advertised-listeners
INTERNAL://groupd:9092,EXTERNAL://localhost:19092``. A name appears at most once. Without
``--listeners`` there is one PLAINTEXT listener on ``--host``/``--port``, exactly what groupd did before
listeners existed.

A broker answers Metadata and FindCoordinator with the endpoint *of the listener the request came in
on*: a client that bootstrapped over SASL_SSL must be sent to the SASL_SSL port, never to PLAINTEXT.
That endpoint is the listener's entry in ``--advertised-listeners`` (Kafka's
``advertised.listeners``), else ``--advertised-host`` (or the bind host) and the bound port.
``Listener.port`` is the bound port (the real one when 0 was asked for), and connections carry their
``Listener`` (``Connection.listener``), so handlers look the endpoint up per request.
"""

from __future__ import annotations

import ssl
from typing import Any, Protocol

from groupd.protocol.frozen import mutable_record


class ListenerSettings(Protocol):
    """What listeners are made from: the broker's settings (``groupd.broker.settings.Config``),
    named structurally so security never imports the broker that wires it."""

    host: str
    port: int
    advertised_host: str
    listeners: str
    listener_security_protocol_map: str
    advertised_listeners: str
    ssl_certfile: str
    ssl_keyfile: str
    ssl_cafile: str
    ssl_client_auth: str


PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


@mutable_record
class Listener:
    protocol: str
    host: str
    port: int
    advertised_host: str
    # Kafka's listener name when it is not the protocol's own (listener.security.protocol.map).
    label: str = ""
    advertised_port: int = 0  # 0: the bound port

    def __init__(
        self,
        protocol: str,
        host: str,
        port: int,
        advertised_host: str,
        label: str = "",
        advertised_port: int = 0,
    ) -> None:
        self.protocol = protocol
        self.host = host
        self.port = port
        self.advertised_host = advertised_host
        self.label = label
        self.advertised_port = advertised_port

    @property
    def name(self) -> str:
        return self.label or self.protocol

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def _protocol_map(text: str) -> dict[str, str]:
    """``INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL``; every protocol's own name maps to itself (Kafka's default)."""
    out = {p: p for p in PROTOCOLS}
    for item in filter(None, (i.strip() for i in text.split(","))):
        name, sep, proto = item.partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not name or proto not in PROTOCOLS:
            raise ValueError(
                f"--listener-security-protocol-map entry {item!r}: expected NAME:PROTOCOL with PROTOCOL one of "
                f"{', '.join(PROTOCOLS)}"
            )
        if name in PROTOCOLS and proto != name:
            raise ValueError(f"--listener-security-protocol-map: {name} cannot mean {proto}")
        out[name] = proto
    return out


def _endpoints(text: str, what: str) -> list[tuple[str, str, int]]:
    """``NAME://host:port,...`` -> (NAME, host, port); an empty host stays empty."""
    out = []
    for item in filter(None, (i.strip() for i in text.split(","))):
        name, sep, rest = item.partition("://")
        host, colon, port_s = rest.rpartition(":")
        if not sep or not name.strip() or not colon or not port_s.isdigit() or int(port_s) > 65535:
            raise ValueError(f"{what} {item!r}: expected NAME://host:port")
        name = name.strip().upper()
        if any(n == name for n, _, _ in out):
            raise ValueError(f"{what}: listener {name} is given twice")
        out.append((name, host.strip("[]"), int(port_s)))
    return out


def parse_listeners(config: ListenerSettings) -> list[Listener]:
    """The configured listeners, in order; raises ValueError on a malformed list."""
    advertised = config.advertised_host
    protocols = _protocol_map(config.listener_security_protocol_map)
    announced = {n: (h, p) for n, h, p in _endpoints(config.advertised_listeners, "--advertised-listeners")}
    if not config.listeners.strip():
        if announced:
            raise ValueError("--advertised-listeners needs --listeners")
        return [Listener("PLAINTEXT", config.host, int(config.port), advertised or config.host)]
    out: list[Listener] = []
    endpoints = _endpoints(config.listeners, "listener")
    if not endpoints:
        raise ValueError("--listeners is empty")
    for name, host, port in endpoints:
        if name not in protocols:
            raise ValueError(
                f"listener {name}: not a security protocol ({', '.join(PROTOCOLS)}) and not named in "
                "--listener-security-protocol-map"
            )
        host = host or config.host  # "PLAINTEXT://:9092" binds --host, as Kafka binds the default
        ad_host, ad_port = announced.pop(name, ("", 0))
        label = "" if name == protocols[name] else name
        out.append(Listener(protocols[name], host, port, ad_host or advertised or host, label, ad_port))
    if announced:
        raise ValueError(f"--advertised-listeners names listeners that do not exist: {', '.join(announced)}")
    return out


def server_ssl_context(config: ListenerSettings) -> ssl.SSLContext:
    """The TLS context every SSL/SASL_SSL listener shares (checked at start-up, not per connection)."""
    if not config.ssl_certfile:
        raise ValueError("an SSL or SASL_SSL listener needs --ssl-certfile (and --ssl-keyfile)")
    mode = CLIENT_AUTH.get(config.ssl_client_auth.strip().lower())
    if mode is None:
        raise ValueError(f"--ssl-client-auth must be one of {', '.join(CLIENT_AUTH)}, not {config.ssl_client_auth!r}")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(config.ssl_certfile, config.ssl_keyfile or None)
    if mode != ssl.CERT_NONE:
        if not config.ssl_cafile:
            raise ValueError("--ssl-client-auth requested/required needs --ssl-cafile to verify client certificates")
        ctx.load_verify_locations(cafile=config.ssl_cafile)
    elif config.ssl_cafile:
        ctx.load_verify_locations(cafile=config.ssl_cafile)
    ctx.verify_mode = mode
    return ctx


def certificate_cn(peercert: dict[str, Any] | None) -> str | None:
    """The subject's common name of a verified peer certificate (``ssl.SSLObject.getpeercert()``)."""
    if not peercert:
        return None
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def endpoint(conn_listener: Listener | None, default: Listener) -> tuple[str, int]:
    """The (host, port) a client on this connection's listener is told to connect to."""
    li = conn_listener if isinstance(conn_listener, Listener) else default
    return li.advertised_host, li.advertised_port or li.port


def advertise_per_listener(dispatcher: Any, node_id: int, default: Listener) -> None:
    """Make FindCoordinator name this node by the endpoint of the listener the request came in on.

    The coordinator core knows one ``Node`` (the first listener); rewriting its answers here keeps
    listeners out of the sans-IO core.
    """
    route = dispatcher.routes.get(10)  # FindCoordinator
    if route is None:
        return
    inner = route.handler

    def handler(req: Any) -> Any:
        host, port = endpoint(req.conn.listener, default)

        def fix(body: dict[str, Any]) -> dict[str, Any]:
            if "coordinators" in body:
                body["coordinators"] = [
                    {**c, "host": host, "port": port} if c.get("node_id") == node_id else c
                    for c in body["coordinators"]
                ]
            elif body.get("node_id") == node_id:
                body = {**body, "host": host, "port": port}
            return body

        encode = req.encode_response
        req.encode_response = lambda r, body: encode(r, fix(body))
        return inner(req)

    route.handler = handler
