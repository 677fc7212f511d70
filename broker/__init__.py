"""groupd.broker: one Kafka node made of the floors below it.

Owns the data plane (Produce, Fetch, ListOffsets, and the idempotent-producer state), topics and
their configs (``topics.py``), the admin APIs (Metadata, CreateTopics, DeleteTopics,
CreatePartitions: ``admin_handlers.py``), the asyncio shell that feeds the sans-IO group coordinator
and writes its records (``group_shell.py``), the settings of a node (``settings.py``), the API table
(``apis.py``: each API's handler, versions, authorization and cluster routing, one row per API) and
the wiring of one node (``node.py``). It knows nothing of command-line parsing, the process around it (signals,
metrics: ``groupd.daemon``) or the tools operators hold (``groupd.ops``).

Where a request goes: ``protocol/server.py`` frames it, ``protocol/dispatch.py`` decodes it and calls
the handler ``node.py`` registered from the table in ``apis.py``; group APIs reach ``coordinator/`` through ``group_shell.py``,
whose records reach the disk through ``storage/appender.py``.
"""
