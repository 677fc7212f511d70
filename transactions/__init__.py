"""groupd's sans-IO transaction coordinator (Kafka's ``TransactionCoordinator`` and ``TransactionStateManager``).

Owns transactional ids: their producer id and epoch, the state of their current transaction (the
states and their legal transitions in ``state.py``), its partitions, its timeout, and the
``__transaction_state`` records that persist all of it (``records.py``, ``serde.py``), partitioned
by Kafka's ``abs(javaStringHashCode(transactional_id)) % 50``. The coordinator (``coordinator.py``)
is handed the time and requests, and hands back answers, records to append and transaction markers
to write; its state is a fold over its records (``replay``), live and at start-up alike.

It knows nothing of sockets, transports, clocks, file layout, partition logs or consumer groups:
producer ids come from a collaborator passed in (``producer_ids.py``), markers are written by the
shell, and a group's ``__consumer_offsets`` partition is handed in by the caller. Of
``coordinator/`` (same floor) it imports only the generic runtime (``coordinator/runtime.py``:
partition loading, routing errors, the call's result, deferred appends), nothing of groups; the
shared key hash lives in ``protocol/partitioning.py``.
"""
