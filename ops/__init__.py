"""groupd.ops: what operators and testers hold.

Owns the admin CLI (``admin_cli.py``) and the small Kafka client it speaks with
(``kafka_client.py``), the Prometheus metrics (``metrics.py``) and the pytest plugin that starts real
brokers as fixtures (``pytest_plugin.py``). Later the dashboard and the fault-injection control live
here. It uses only the public surfaces of the floors below (the broker's parts, the coordinator's
listener, the protocol's codec) and nothing of their internals; nothing below imports it.
"""
