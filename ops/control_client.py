"""A client of the fault-injection control endpoint (``ops.control``), for the ``groupd fault`` commands
and the pytest plugin's ``broker.faults``. Blocking (urllib): both are called from plain test code."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


class ControlError(RuntimeError):
    """The endpoint refused (``status`` and its JSON ``message``) or could not be reached (status 0)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.message = message


class FaultsClient:
    """``faults.add(api="Heartbeat", error="NOT_COORDINATOR", count=3, group="billing")`` and friends.

    ``url`` is the endpoint's base, ``http://127.0.0.1:PORT``."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def add(self, api: str, **spec: Any) -> dict[str, Any]:
        """Add a rule (``error=``, ``delay_ms=`` or ``kind="close"``; ``count``, ``probability``,
        ``group``, ``topic``, ``client_id``, ``broker``); returns it with its ``id``."""
        doc = {"api": api, **{k: v for k, v in spec.items() if v is not None}}
        return self._call("POST", "/faults", doc)["fault"]

    def list(self) -> list[dict[str, Any]]:
        return self._call("GET", "/faults")["faults"]

    def get(self, rule_id: int) -> dict[str, Any]:
        return self._call("GET", f"/faults/{rule_id}")["fault"]

    def clear(self, rule_id: int | None = None) -> int:
        """Clear one rule, or every rule; returns how many went."""
        path = "/faults" if rule_id is None else f"/faults/{rule_id}"
        return self._call("DELETE", path)["cleared"]

    def expire_member(self, group: str, member: str) -> dict[str, Any]:
        return self._call("POST", "/actions/expire-member", {"group": group, "member": member})

    def expire_locks(self, group: str, topic: str | None = None, partition: int | None = None) -> dict[str, Any]:
        """A share group's acquisition locks expire now: ``{"partitions": n, "records": n, ...}``."""
        body: dict[str, Any] = {"group": group}
        if topic is not None:
            body["topic"] = topic
        if partition is not None:
            body["partition"] = partition
        return self._call("POST", "/actions/expire-locks", body)

    def trigger_rebalance(self, group: str) -> dict[str, Any]:
        return self._call("POST", "/actions/trigger-rebalance", {"group": group})

    # --- brokers (cluster mode: groupd serve --brokers N) -----------------------------------------
    def brokers(self) -> dict[str, Any]:
        """``{"controller_id": 1, "brokers": [{"node_id", "host", "port", "state"}, ...]}``."""
        return self._call("GET", "/brokers")

    def stop_broker(self, broker: int) -> dict[str, Any]:
        return self._call("POST", "/actions/stop-broker", {"broker": broker})

    def start_broker(self, broker: int, *, rebalance: bool = False) -> dict[str, Any]:
        return self._call("POST", "/actions/start-broker", {"broker": broker, "rebalance": rebalance})

    def isolate_broker(self, broker: int, isolated: bool = True) -> dict[str, Any]:
        return self._call("POST", "/actions/isolate-broker", {"broker": broker, "isolated": isolated})

    def rebalance_leaders(self) -> dict[str, Any]:
        return self._call("POST", "/actions/rebalance-leaders", {})

    def move_coordinator(self, group: str, broker: int) -> dict[str, Any]:
        return self._call("POST", "/actions/move-coordinator", {"group": group, "broker": broker})

    def _call(self, method: str, path: str, doc: Any = None) -> Any:
        data = None if doc is None else json.dumps(doc).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            body = e.read()
            try:
                message = json.loads(body)["message"]
            except (ValueError, KeyError, TypeError):
                message = body.decode(errors="replace").strip() or e.reason
            raise ControlError(e.code, message) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ControlError(0, f"cannot reach the control endpoint at {self.url}: {reason}") from None
