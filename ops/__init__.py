"""groupd.ops: what operators and testers hold.

Owns the admin CLI (``admin_cli.py``) and the small Kafka client it speaks with
(``kafka_client.py``), the Prometheus metrics (``metrics.py``), the live dashboard (``dashboard.py``,
its page in ``static/``), what both read of groups and lag (``group_view.py``), their small HTTP
server (``http.py``) and the pytest plugin that starts real brokers as fixtures
(``pytest_plugin.py``). Later the fault-injection control lives here too. It uses only the public surfaces of the floors below (the broker's parts, the coordinator's
listener, the protocol's codec) and nothing of their internals; nothing below imports it.
"""
