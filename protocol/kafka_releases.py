"""Apache Kafka releases groupd can pose as (``--kafka-version``): the API versions a release's broker
listener accepts and advertises, and the features its ApiVersions reports.

The version ranges are generated from each release's message specs (``kafka_releases_data``, made by
``tools/gen_kafka_releases.py``); the features are read by hand from the release's
``server-common`` (``Feature`` / ``Features``, ``GroupVersion``, ``TransactionVersion``,
``ShareVersion``, ``MetadataVersion.LATEST_PRODUCTION``) and ``BrokerFeatures.defaultSupportedFeatures``:
supported ``minimumProduction..latestProduction`` (unstable feature versions off; a feature whose
latest production level is 0 is not listed), finalized at the level a freshly formatted cluster gets
(``Feature.defaultVersion(MetadataVersion.LATEST_PRODUCTION)``). ``metadata.version`` and
``kraft.version`` are KRaft's own and left out.
"""

from __future__ import annotations

from groupd.protocol.frozen import frozen_record

from .kafka_releases_data import API_RANGES, RELEASE_TAGS

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field

__all__ = ["RELEASES", "ApiRange", "KafkaRelease", "release"]


@frozen_record
class ApiRange:
    name: str
    # ``ApiKeys.isVersionEnabled``: a request outside closes the connection (ApiVersions excepted).
    accepted: tuple[int, int]
    # what ApiVersions says (Produce from 4.0 on: min 0 while v0-2 are refused, KAFKA-18659)
    advertised: tuple[int, int]
    # GetTelemetrySubscriptions / PushTelemetry: advertised only with a telemetry receiver
    telemetry: bool = False

    def __init__(
        self,
        name: str,
        accepted: tuple[int, int],
        advertised: tuple[int, int],
        telemetry: bool = False,
    ) -> None:
        _set(self, "name", name)
        _set(self, "accepted", accepted)
        _set(self, "advertised", advertised)
        _set(self, "telemetry", telemetry)


@frozen_record
class KafkaRelease:
    name: str
    tag: str
    apis: dict[int, ApiRange]
    # name -> (supported min, supported max, finalized level) as Kafka's ApiVersions reports it
    features: dict[str, tuple[int, int, int]]

    def __init__(
        self,
        name: str,
        tag: str,
        apis: dict[int, ApiRange],
        features: dict[str, tuple[int, int, int]],
    ) -> None:
        _set(self, "name", name)
        _set(self, "tag", tag)
        _set(self, "apis", apis)
        _set(self, "features", features)


# share.version in 4.1: SV_1 is LATEST_PRODUCTION but bootstraps at IBP_4_2_IV0, above 4.1's
# LATEST_PRODUCTION (IBP_4_1_IV1), so a fresh 4.1 cluster finalizes 0 (share groups were a preview).
# 3.9: group.version is not among Features (KIP-848 was a preview behind
# group.coordinator.rebalance.protocols), and TV_1/TV_2 bootstrap at IBP_4_0_IV0 > IBP_3_9_IV0, so
# transaction.version's latest production level is 0 and BrokerFeatures leaves it out (maxVersion > 0).
_FEATURES: dict[str, dict[str, tuple[int, int, int]]] = {
    "3.9": {},
    "4.0": {"group.version": (0, 1, 1), "transaction.version": (0, 2, 2)},
    "4.1": {"group.version": (0, 1, 1), "transaction.version": (0, 2, 2), "share.version": (0, 1, 0)},
    "4.2": {"group.version": (0, 1, 1), "transaction.version": (0, 2, 2), "share.version": (0, 1, 1)},
}


def _build(name: str) -> KafkaRelease:
    apis = {
        key: ApiRange(api_name, (lo, hi), (adv_lo, adv_hi), telemetry)
        for key, (api_name, lo, hi, adv_lo, adv_hi, telemetry) in API_RANGES[name].items()
    }
    return KafkaRelease(name, RELEASE_TAGS[name], apis, _FEATURES[name])


RELEASES: dict[str, KafkaRelease] = {name: _build(name) for name in RELEASE_TAGS}


def release(name: str) -> KafkaRelease:
    try:
        return RELEASES[name.strip()]
    except KeyError:
        raise ValueError(f"must be one of {', '.join(RELEASES)}, not {name!r}") from None
