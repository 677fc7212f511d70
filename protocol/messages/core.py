"""Broker-level APIs: ApiVersions, Metadata and topic administration."""

from __future__ import annotations

from ..schema import api, f

API_VERSIONS = api(
    18,
    "ApiVersions",
    valid="0-4",
    flexible="3+",
    request=[
        f("client_software_name", "string", "3+"),
        f("client_software_version", "string", "3+"),
    ],
    response=[
        f("error_code", "int16"),
        f(
            "api_keys",
            "[]",
            "0+",
            f("api_key", "int16"),
            f("min_version", "int16"),
            f("max_version", "int16"),
        ),
        f("throttle_time_ms", "int32", "1+"),
        f(
            "supported_features",
            "[]",
            "3+",
            f("name", "string"),
            f("min_version", "int16"),
            f("max_version", "int16"),
            tag=0,
            tagged="3+",
        ),
        f("finalized_features_epoch", "int64", "3+", default=-1, tag=1, tagged="3+"),
        f(
            "finalized_features",
            "[]",
            "3+",
            f("name", "string"),
            f("max_version_level", "int16"),
            f("min_version_level", "int16"),
            tag=2,
            tagged="3+",
        ),
        f("zk_migration_ready", "bool", "3+", default=False, tag=3, tagged="3+"),
    ],
)
