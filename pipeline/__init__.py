"""groupd.pipeline: PySpark analytics over groupd's ``__consumer_offsets`` log.

``groupd analyze --data-dir DATA --out OUT`` reads the log with the ``groupd-log`` Spark data
source (``source.py``, decoding with groupd's own storage and coordinator code in ``decode.py``),
derives the offset_commits / generations / rebalances / anomalies tables (``tables.py``), writes
them as Parquet and renders ``OUT/report.html`` (``report.py``). ``job.py`` is the entry point,
also runnable with ``spark-submit`` (see README.md in this folder).

It reads a data directory's logs through storage/ and coordinator/ decoding only: it knows nothing of
the server and never talks to a running daemon. Importing this package does not import pyspark; its
submodules do.
"""

TABLES = (
    "offset_commits",
    "generations",
    "rebalances",
    "anomalies",
    "consumer_group_epochs",
    "consumer_group_members",
)
