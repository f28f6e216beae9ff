import datetime

from evora.v1 import queue_pb2 as _queue_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATE_UNSPECIFIED: _ClassVar[JobState]
    JOB_STATE_PENDING: _ClassVar[JobState]
    JOB_STATE_RUNNING: _ClassVar[JobState]
    JOB_STATE_COMPLETED: _ClassVar[JobState]
    JOB_STATE_DLQ: _ClassVar[JobState]
    JOB_STATE_CANCELLED: _ClassVar[JobState]
    JOB_STATE_WAITING: _ClassVar[JobState]

class AttemptOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ATTEMPT_OUTCOME_UNSPECIFIED: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_RUNNING: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_COMPLETED: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_FAILED: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_TIMED_OUT: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_LEASE_EXPIRED: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_SNOOZED: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_CANCELLED: _ClassVar[AttemptOutcome]
JOB_STATE_UNSPECIFIED: JobState
JOB_STATE_PENDING: JobState
JOB_STATE_RUNNING: JobState
JOB_STATE_COMPLETED: JobState
JOB_STATE_DLQ: JobState
JOB_STATE_CANCELLED: JobState
JOB_STATE_WAITING: JobState
ATTEMPT_OUTCOME_UNSPECIFIED: AttemptOutcome
ATTEMPT_OUTCOME_RUNNING: AttemptOutcome
ATTEMPT_OUTCOME_COMPLETED: AttemptOutcome
ATTEMPT_OUTCOME_FAILED: AttemptOutcome
ATTEMPT_OUTCOME_TIMED_OUT: AttemptOutcome
ATTEMPT_OUTCOME_LEASE_EXPIRED: AttemptOutcome
ATTEMPT_OUTCOME_SNOOZED: AttemptOutcome
ATTEMPT_OUTCOME_CANCELLED: AttemptOutcome

class Job(_message.Message):
    __slots__ = ("id", "queue", "type", "payload", "state", "priority", "attempt", "max_attempts", "run_at", "created_at", "started_at", "finished_at", "idempotency_key", "worker_id", "result", "last_error", "cancel_requested", "lease_expires_at", "concurrency_key", "depends_on", "progress")
    ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    RUN_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    DEPENDS_ON_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    id: str
    queue: str
    type: str
    payload: _struct_pb2.Struct
    state: JobState
    priority: int
    attempt: int
    max_attempts: int
    run_at: _timestamp_pb2.Timestamp
    created_at: _timestamp_pb2.Timestamp
    started_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    idempotency_key: str
    worker_id: str
    result: _struct_pb2.Struct
    last_error: str
    cancel_requested: bool
    lease_expires_at: _timestamp_pb2.Timestamp
    concurrency_key: str
    depends_on: _containers.RepeatedScalarFieldContainer[str]
    progress: JobProgress
    def __init__(self, id: _Optional[str] = ..., queue: _Optional[str] = ..., type: _Optional[str] = ..., payload: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., state: _Optional[_Union[JobState, str]] = ..., priority: _Optional[int] = ..., attempt: _Optional[int] = ..., max_attempts: _Optional[int] = ..., run_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., worker_id: _Optional[str] = ..., result: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., last_error: _Optional[str] = ..., cancel_requested: _Optional[bool] = ..., lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., concurrency_key: _Optional[str] = ..., depends_on: _Optional[_Iterable[str]] = ..., progress: _Optional[_Union[JobProgress, _Mapping]] = ...) -> None: ...

class JobProgress(_message.Message):
    __slots__ = ("percent", "done", "total", "message", "attempt", "reported_at")
    PERCENT_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    REPORTED_AT_FIELD_NUMBER: _ClassVar[int]
    percent: float
    done: int
    total: int
    message: str
    attempt: int
    reported_at: _timestamp_pb2.Timestamp
    def __init__(self, percent: _Optional[float] = ..., done: _Optional[int] = ..., total: _Optional[int] = ..., message: _Optional[str] = ..., attempt: _Optional[int] = ..., reported_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class JobAttempt(_message.Message):
    __slots__ = ("attempt", "worker_id", "started_at", "finished_at", "outcome", "error")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    worker_id: str
    started_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    outcome: AttemptOutcome
    error: str
    def __init__(self, attempt: _Optional[int] = ..., worker_id: _Optional[str] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., outcome: _Optional[_Union[AttemptOutcome, str]] = ..., error: _Optional[str] = ...) -> None: ...

class SubmitJobRequest(_message.Message):
    __slots__ = ("queue", "type", "payload", "priority", "run_at", "idempotency_key", "max_attempts", "backoff", "timeout", "concurrency_key", "depends_on", "ref", "depends_on_refs", "payload_json")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    RUN_AT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    DEPENDS_ON_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    DEPENDS_ON_REFS_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    queue: str
    type: str
    payload: _struct_pb2.Struct
    priority: int
    run_at: _timestamp_pb2.Timestamp
    idempotency_key: str
    max_attempts: int
    backoff: _queue_pb2.Backoff
    timeout: _duration_pb2.Duration
    concurrency_key: str
    depends_on: _containers.RepeatedScalarFieldContainer[str]
    ref: str
    depends_on_refs: _containers.RepeatedScalarFieldContainer[str]
    payload_json: bytes
    def __init__(self, queue: _Optional[str] = ..., type: _Optional[str] = ..., payload: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., priority: _Optional[int] = ..., run_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., max_attempts: _Optional[int] = ..., backoff: _Optional[_Union[_queue_pb2.Backoff, _Mapping]] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., concurrency_key: _Optional[str] = ..., depends_on: _Optional[_Iterable[str]] = ..., ref: _Optional[str] = ..., depends_on_refs: _Optional[_Iterable[str]] = ..., payload_json: _Optional[bytes] = ...) -> None: ...

class SubmitJobResponse(_message.Message):
    __slots__ = ("job", "created")
    JOB_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    job: Job
    created: bool
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class SubmitJobsRequest(_message.Message):
    __slots__ = ("jobs", "ids_only")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    IDS_ONLY_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[SubmitJobRequest]
    ids_only: bool
    def __init__(self, jobs: _Optional[_Iterable[_Union[SubmitJobRequest, _Mapping]]] = ..., ids_only: _Optional[bool] = ...) -> None: ...

class SubmitJobsResponse(_message.Message):
    __slots__ = ("results", "ids", "created")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[SubmitJobResponse]
    ids: _containers.RepeatedScalarFieldContainer[str]
    created: _containers.RepeatedScalarFieldContainer[bool]
    def __init__(self, results: _Optional[_Iterable[_Union[SubmitJobResponse, _Mapping]]] = ..., ids: _Optional[_Iterable[str]] = ..., created: _Optional[_Iterable[bool]] = ...) -> None: ...

class SubmitJobStreamRequest(_message.Message):
    __slots__ = ("request_id", "job")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    job: SubmitJobRequest
    def __init__(self, request_id: _Optional[int] = ..., job: _Optional[_Union[SubmitJobRequest, _Mapping]] = ...) -> None: ...

class SubmitJobStreamResponse(_message.Message):
    __slots__ = ("request_id", "result", "error")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    result: SubmitJobResponse
    error: SubmitJobStreamError
    def __init__(self, request_id: _Optional[int] = ..., result: _Optional[_Union[SubmitJobResponse, _Mapping]] = ..., error: _Optional[_Union[SubmitJobStreamError, _Mapping]] = ...) -> None: ...

class SubmitJobStreamError(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetJobResponse(_message.Message):
    __slots__ = ("job", "attempts", "dependents")
    JOB_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    DEPENDENTS_FIELD_NUMBER: _ClassVar[int]
    job: Job
    attempts: _containers.RepeatedCompositeFieldContainer[JobAttempt]
    dependents: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ..., attempts: _Optional[_Iterable[_Union[JobAttempt, _Mapping]]] = ..., dependents: _Optional[_Iterable[str]] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("queue", "states", "type", "page_size", "page_token", "idempotency_key", "error_group")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    ERROR_GROUP_FIELD_NUMBER: _ClassVar[int]
    queue: str
    states: _containers.RepeatedScalarFieldContainer[JobState]
    type: str
    page_size: int
    page_token: str
    idempotency_key: str
    error_group: str
    def __init__(self, queue: _Optional[str] = ..., states: _Optional[_Iterable[_Union[JobState, str]]] = ..., type: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., error_group: _Optional[str] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ("jobs", "next_page_token")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[Job]
    next_page_token: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[Job, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class CancelJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: Job
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ...) -> None: ...

class RetryJobRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RetryJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: Job
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ...) -> None: ...

class JobFilter(_message.Message):
    __slots__ = ("queue", "states", "type", "finished_before", "ids", "error_group")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    FINISHED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    ERROR_GROUP_FIELD_NUMBER: _ClassVar[int]
    queue: str
    states: _containers.RepeatedScalarFieldContainer[JobState]
    type: str
    finished_before: _timestamp_pb2.Timestamp
    ids: _containers.RepeatedScalarFieldContainer[str]
    error_group: str
    def __init__(self, queue: _Optional[str] = ..., states: _Optional[_Iterable[_Union[JobState, str]]] = ..., type: _Optional[str] = ..., finished_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ids: _Optional[_Iterable[str]] = ..., error_group: _Optional[str] = ...) -> None: ...

class RetryJobsRequest(_message.Message):
    __slots__ = ("filter", "dry_run")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    filter: JobFilter
    dry_run: bool
    def __init__(self, filter: _Optional[_Union[JobFilter, _Mapping]] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class RetryJobsResponse(_message.Message):
    __slots__ = ("count", "finished_before")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    count: int
    finished_before: _timestamp_pb2.Timestamp
    def __init__(self, count: _Optional[int] = ..., finished_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class PurgeJobsRequest(_message.Message):
    __slots__ = ("filter", "dry_run")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    filter: JobFilter
    dry_run: bool
    def __init__(self, filter: _Optional[_Union[JobFilter, _Mapping]] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class PurgeJobsResponse(_message.Message):
    __slots__ = ("count", "finished_before")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    count: int
    finished_before: _timestamp_pb2.Timestamp
    def __init__(self, count: _Optional[int] = ..., finished_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CancelJobsRequest(_message.Message):
    __slots__ = ("filter", "dry_run")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    filter: JobFilter
    dry_run: bool
    def __init__(self, filter: _Optional[_Union[JobFilter, _Mapping]] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class CancelJobsResponse(_message.Message):
    __slots__ = ("count",)
    COUNT_FIELD_NUMBER: _ClassVar[int]
    count: int
    def __init__(self, count: _Optional[int] = ...) -> None: ...

class ListDeadLetterGroupsRequest(_message.Message):
    __slots__ = ("queue", "limit")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    queue: str
    limit: int
    def __init__(self, queue: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListDeadLetterGroupsResponse(_message.Message):
    __slots__ = ("groups", "truncated", "total_groups")
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    TOTAL_GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[DeadLetterGroup]
    truncated: bool
    total_groups: int
    def __init__(self, groups: _Optional[_Iterable[_Union[DeadLetterGroup, _Mapping]]] = ..., truncated: _Optional[bool] = ..., total_groups: _Optional[int] = ...) -> None: ...

class DeadLetterGroup(_message.Message):
    __slots__ = ("queue", "type", "error", "count", "newest_finished_at")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    NEWEST_FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    queue: str
    type: str
    error: str
    count: int
    newest_finished_at: _timestamp_pb2.Timestamp
    def __init__(self, queue: _Optional[str] = ..., type: _Optional[str] = ..., error: _Optional[str] = ..., count: _Optional[int] = ..., newest_finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListJobAttemptsRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ListJobAttemptsResponse(_message.Message):
    __slots__ = ("attempts",)
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    attempts: _containers.RepeatedCompositeFieldContainer[JobAttempt]
    def __init__(self, attempts: _Optional[_Iterable[_Union[JobAttempt, _Mapping]]] = ...) -> None: ...
