"""groupd.broker: one Kafka node made of the floors below it.

Owns the data plane, one module per API (``data_plane/``: Produce, Fetch, ListOffsets,
DescribeProducers, transaction markers, the idempotent-producer state), topics and their configs
(``topics.py``), the admin APIs (Metadata, CreateTopics, DeleteTopics, CreatePartitions:
``admin_handlers.py``), the asyncio shells that feed the sans-IO group and transaction coordinators
and write their records (``group_shell.py``, ``txn_shell.py``, sharing one apply/append/drain in
``coordinator_shell.py``), KIP-932 delivery (``share/``: ShareFetch, ShareAcknowledge, the
share-partitions over the partition logs and ``__share_group_state``), the settings of a node (``settings.py``), the API table
(``apis.py``: each API's handler, versions, authorization and cluster routing, one row per API) and
the wiring of one node (``node.py``). It knows nothing of command-line parsing, the process around it (signals,
metrics: ``groupd.daemon``) or the tools operators hold (``groupd.ops``).

Where a request goes: ``protocol/server.py`` frames it, ``protocol/dispatch.py`` decodes it and calls
the handler ``node.py`` registered from the table in ``apis.py``; group APIs reach ``coordinator/``
through ``group_shell.py``, whose records reach the disk through ``storage/appender.py``.
"""
