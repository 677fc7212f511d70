"""DescribeUserScramCredentials and AlterUserScramCredentials over the node's credential store.

As Kafka: DescribeUserScramCredentials needs DESCRIBE on the cluster (``KafkaApis``, refused:
CLUSTER_AUTHORIZATION_FAILED at the top and per user asked), AlterUserScramCredentials ALTER on the
cluster (``ControllerApis``, refused: every user of the request). Without an authorizer anyone may.
The validation is ``ScramControlManager.alterCredentials`` and the description ``ScramImage.describe``:
one alteration per user per request (DUPLICATE_RESOURCE for every alteration of a user named twice),
an empty user name or too few/many iterations UNACCEPTABLE_CREDENTIAL, an unknown mechanism
UNSUPPORTED_SASL_MECHANISM, deleting a credential that does not exist RESOURCE_NOT_FOUND. An
upsertion carries the salted password; the store keeps StoredKey and ServerKey, persisted before
the answer, and the next authentication uses them (``security.scram.CredentialStore.alter``).
"""

from __future__ import annotations

from typing import Any

import structlog
from groupd.protocol.errors import ErrorCode, default_message
from groupd.protocol.server import Request
from groupd.security.acl import Authorizer, subject_of
from groupd.security.acl_model import CLUSTER_NAME, AclOperation, ResourceType
from groupd.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_BY_CODE,
    MECHANISM_CODES,
    MIN_ITERATIONS,
    CredentialStore,
    ScramCredential,
    credential_from_salted_password,
)

log = structlog.get_logger("groupd.scram")

_TWICE = "A user credential cannot be altered twice in the same request"
Error = tuple[int, str]


class ScramApis:
    def __init__(self, store: CredentialStore, authorizer: Authorizer) -> None:
        self.store = store
        self.authz = authorizer

    def _allowed(self, req: Request, op: AclOperation) -> bool:
        return self.authz.authorize(subject_of(req), op, ResourceType.CLUSTER, CLUSTER_NAME)

    # --- DescribeUserScramCredentials (KafkaApis.handleDescribeUserScramCredentialsRequest) ---------
    def describe(self, req: Request) -> dict[str, Any]:
        asked = req.body.get("users")
        if not self._allowed(req, AclOperation.DESCRIBE):
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            message = default_message(code)
            # DescribeUserScramCredentialsRequest.getErrorResponse: one entry per user asked, unnamed
            entries = [
                {"user": "", "error_code": code, "error_message": message, "credential_infos": []} for _ in asked or ()
            ]
            return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "results": entries}
        # ScramImage.describe: null or empty asks for every user; a name asked twice is refused
        names: dict[str, bool] = {}
        if asked:
            for u in asked:
                names[u["name"]] = u["name"] in names
        else:
            names = dict.fromkeys(self.store.users(), False)
        results = []
        for user, twice in names.items():
            if twice:
                results.append(_described(user, ErrorCode.DUPLICATE_RESOURCE, _DUPLICATE_DESCRIBE + user))
                continue
            creds = self.store.credentials(user)
            if not creds:
                results.append(_described(user, ErrorCode.RESOURCE_NOT_FOUND, _NO_SUCH_USER + user))
                continue
            infos = [
                {"mechanism": MECHANISM_CODES[m], "iterations": c.iterations}
                for m, c in sorted(creds.items(), key=lambda mc: MECHANISM_CODES[mc[0]])
            ]
            results.append({"user": user, "error_code": 0, "error_message": None, "credential_infos": infos})
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": results}

    # --- AlterUserScramCredentials (ControllerApis -> ScramControlManager.alterCredentials) ---------
    def alter(self, req: Request) -> dict[str, Any]:
        deletions = req.body.get("deletions") or []
        upsertions = req.body.get("upsertions") or []
        if not self._allowed(req, AclOperation.ALTER):
            # AlterUserScramCredentialsRequest.getErrorResponse: each user named, sorted
            users = sorted({d["name"] for d in deletions} | {u["name"] for u in upsertions})
            message = "Request needs ALTER permission."
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return {
                "throttle_time_ms": 0,
                "results": [{"user": u, "error_code": code, "error_message": message} for u in users],
            }
        errors: dict[str, Error] = {}
        to_delete: dict[str, str] = {}  # user -> mechanism
        to_upsert: dict[str, tuple[str, ScramCredential]] = {}
        for d in deletions:
            user = d["name"]
            if user in errors:
                continue
            if to_delete.pop(user, None) is not None:
                errors[user] = (ErrorCode.DUPLICATE_RESOURCE, _TWICE)
                continue
            mech = MECHANISM_BY_CODE.get(d["mechanism"])
            error = _name_and_mechanism(user, mech)
            if error is None and self.store.scram(user, mech or "") is None:
                error = (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
            if error is not None:
                errors[user] = error
            else:
                to_delete[user] = mech or ""
        for u in upsertions:
            user = u["name"]
            if user in errors:
                continue
            if to_delete.pop(user, None) is not None or to_upsert.pop(user, None) is not None:
                errors[user] = (ErrorCode.DUPLICATE_RESOURCE, _TWICE)
                continue
            mech = MECHANISM_BY_CODE.get(u["mechanism"])
            error = _name_and_mechanism(user, mech)
            if error is None and u["iterations"] < MIN_ITERATIONS:
                error = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            elif error is None and u["iterations"] > MAX_ITERATIONS:
                error = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
            if error is None and not u["salt"]:
                # groupd's own: a credential must have a salt to be usable (scramp refuses it)
                error = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "The salt must not be empty")
            if error is not None:
                errors[user] = error
                continue
            assert mech is not None
            cred = credential_from_salted_password(mech, u["salt"], u["iterations"], u["salted_password"])
            to_upsert[user] = (mech, cred)
        results = []
        if to_delete or to_upsert:
            try:
                self.store.alter(
                    [(user, mech) for user, mech in to_delete.items()],
                    [(user, mech, cred) for user, (mech, cred) in to_upsert.items()],
                )
            except OSError as exc:
                log.error("scram_credentials_save_failed", error=str(exc))
                for user in [*to_delete, *to_upsert]:
                    errors[user] = (ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot save SCRAM credentials: {exc}")
                to_delete, to_upsert = {}, {}
            else:
                log.info(
                    "scram_credentials_altered",
                    deleted=[f"{u}/{m}" for u, m in to_delete.items()][:20],
                    upserted=[f"{u}/{m}" for u, (m, _) in to_upsert.items()][:20],
                )
        for user in [*to_delete, *to_upsert]:
            results.append({"user": user, "error_code": 0, "error_message": None})
        for user, (code, message) in errors.items():
            results.append({"user": user, "error_code": code, "error_message": message})
        return {"throttle_time_ms": 0, "results": results}


_DUPLICATE_DESCRIBE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
_NO_SUCH_USER = "Attempt to describe a user credential that does not exist: "


def _described(user: str, code: int, message: str) -> dict[str, Any]:
    return {"user": user, "error_code": code, "error_message": message, "credential_infos": []}


def _name_and_mechanism(user: str, mech: str | None) -> Error | None:
    # ScramControlManager.validateScramUsernameAndMechanism
    if not user:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mech is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None
