"""Kafka error codes the coordinator answers with (clients' ``Errors.java``)."""

NONE = 0
UNKNOWN_SERVER_ERROR = -1
NETWORK_EXCEPTION = 13
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
TRANSACTION_COORDINATOR_FENCED = 52
KAFKA_STORAGE_ERROR = 56
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82
GROUP_SUBSCRIBED_TO_TOPIC = 86
UNSTABLE_OFFSET_COMMIT = 88
FENCED_MEMBER_EPOCH = 110
UNRELEASED_INSTANCE_ID = 111
UNSUPPORTED_ASSIGNOR = 112
STALE_MEMBER_EPOCH = 113
PRODUCER_FENCED = 90
TRANSACTION_ABORTABLE = 120
INVALID_REGULAR_EXPRESSION = 128


def append_error_to_response_error(code: int) -> int:
    """Kafka's ``appendGroupMetadataErrorToResponseError``: what a client is told when a write failed.

    Storage failures become NOT_COORDINATOR so that clients rediscover the coordinator and retry,
    which is what they do against a real broker whose log directory failed.
    """
    if code in (UNKNOWN_TOPIC_OR_PARTITION, 19, 7):  # NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT
        return COORDINATOR_NOT_AVAILABLE
    if code in (6, KAFKA_STORAGE_ERROR):  # NOT_LEADER_OR_FOLLOWER
        return NOT_COORDINATOR
    if code in (10, 18, 4):  # MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_FETCH_SIZE
        return UNKNOWN_SERVER_ERROR
    return code


def error_code_of(exc: BaseException) -> int:
    """The Kafka error code an append failure stands for (KAFKA_STORAGE_ERROR unless it says otherwise)."""
    code = getattr(exc, "error_code", None)
    return code if isinstance(code, int) else KAFKA_STORAGE_ERROR
