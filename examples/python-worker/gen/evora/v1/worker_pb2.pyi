import datetime

from evora.v1 import job_pb2 as _job_pb2
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

class AckResult(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACK_RESULT_UNSPECIFIED: _ClassVar[AckResult]
    ACK_RESULT_ACCEPTED: _ClassVar[AckResult]
    ACK_RESULT_LEASE_LOST: _ClassVar[AckResult]
    ACK_RESULT_RETRY_LATER: _ClassVar[AckResult]
    ACK_RESULT_INVALID: _ClassVar[AckResult]

class CancelReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CANCEL_REASON_UNSPECIFIED: _ClassVar[CancelReason]
    CANCEL_REASON_OPERATOR: _ClassVar[CancelReason]
    CANCEL_REASON_TIMEOUT: _ClassVar[CancelReason]

class LeaseLostReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LEASE_LOST_REASON_UNSPECIFIED: _ClassVar[LeaseLostReason]
    LEASE_LOST_REASON_EXPIRED: _ClassVar[LeaseLostReason]
    LEASE_LOST_REASON_NOT_HELD_ON_RECONNECT: _ClassVar[LeaseLostReason]

class DrainReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DRAIN_REASON_UNSPECIFIED: _ClassVar[DrainReason]
    DRAIN_REASON_SERVER_SHUTDOWN: _ClassVar[DrainReason]
ACK_RESULT_UNSPECIFIED: AckResult
ACK_RESULT_ACCEPTED: AckResult
ACK_RESULT_LEASE_LOST: AckResult
ACK_RESULT_RETRY_LATER: AckResult
ACK_RESULT_INVALID: AckResult
CANCEL_REASON_UNSPECIFIED: CancelReason
CANCEL_REASON_OPERATOR: CancelReason
CANCEL_REASON_TIMEOUT: CancelReason
LEASE_LOST_REASON_UNSPECIFIED: LeaseLostReason
LEASE_LOST_REASON_EXPIRED: LeaseLostReason
LEASE_LOST_REASON_NOT_HELD_ON_RECONNECT: LeaseLostReason
DRAIN_REASON_UNSPECIFIED: DrainReason
DRAIN_REASON_SERVER_SHUTDOWN: DrainReason

class WorkRequest(_message.Message):
    __slots__ = ("hello", "heartbeat", "complete", "fail", "snooze", "drain", "completes", "fails", "progress")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    FAIL_FIELD_NUMBER: _ClassVar[int]
    SNOOZE_FIELD_NUMBER: _ClassVar[int]
    DRAIN_FIELD_NUMBER: _ClassVar[int]
    COMPLETES_FIELD_NUMBER: _ClassVar[int]
    FAILS_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    hello: WorkerHello
    heartbeat: WorkerHeartbeat
    complete: WorkerComplete
    fail: WorkerFail
    snooze: WorkerSnooze
    drain: WorkerDrain
    completes: WorkerCompleteBatch
    fails: WorkerFailBatch
    progress: WorkerProgress
    def __init__(self, hello: _Optional[_Union[WorkerHello, _Mapping]] = ..., heartbeat: _Optional[_Union[WorkerHeartbeat, _Mapping]] = ..., complete: _Optional[_Union[WorkerComplete, _Mapping]] = ..., fail: _Optional[_Union[WorkerFail, _Mapping]] = ..., snooze: _Optional[_Union[WorkerSnooze, _Mapping]] = ..., drain: _Optional[_Union[WorkerDrain, _Mapping]] = ..., completes: _Optional[_Union[WorkerCompleteBatch, _Mapping]] = ..., fails: _Optional[_Union[WorkerFailBatch, _Mapping]] = ..., progress: _Optional[_Union[WorkerProgress, _Mapping]] = ...) -> None: ...

class WorkResponse(_message.Message):
    __slots__ = ("welcome", "job", "ack", "cancel", "lease_lost", "heartbeat_ack", "drain", "jobs", "acks")
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    LEASE_LOST_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_ACK_FIELD_NUMBER: _ClassVar[int]
    DRAIN_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    ACKS_FIELD_NUMBER: _ClassVar[int]
    welcome: ServerWelcome
    job: LeasedJob
    ack: ServerAck
    cancel: ServerCancel
    lease_lost: ServerLeaseLost
    heartbeat_ack: ServerHeartbeatAck
    drain: ServerDrain
    jobs: LeasedJobBatch
    acks: ServerAckBatch
    def __init__(self, welcome: _Optional[_Union[ServerWelcome, _Mapping]] = ..., job: _Optional[_Union[LeasedJob, _Mapping]] = ..., ack: _Optional[_Union[ServerAck, _Mapping]] = ..., cancel: _Optional[_Union[ServerCancel, _Mapping]] = ..., lease_lost: _Optional[_Union[ServerLeaseLost, _Mapping]] = ..., heartbeat_ack: _Optional[_Union[ServerHeartbeatAck, _Mapping]] = ..., drain: _Optional[_Union[ServerDrain, _Mapping]] = ..., jobs: _Optional[_Union[LeasedJobBatch, _Mapping]] = ..., acks: _Optional[_Union[ServerAckBatch, _Mapping]] = ...) -> None: ...

class WorkerHello(_message.Message):
    __slots__ = ("worker_id", "queues", "slots", "held", "accepts_batches", "job_types", "payloads_as_json")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    ACCEPTS_BATCHES_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPES_FIELD_NUMBER: _ClassVar[int]
    PAYLOADS_AS_JSON_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    queues: _containers.RepeatedScalarFieldContainer[str]
    slots: int
    held: _containers.RepeatedCompositeFieldContainer[Lease]
    accepts_batches: bool
    job_types: _containers.RepeatedScalarFieldContainer[str]
    payloads_as_json: bool
    def __init__(self, worker_id: _Optional[str] = ..., queues: _Optional[_Iterable[str]] = ..., slots: _Optional[int] = ..., held: _Optional[_Iterable[_Union[Lease, _Mapping]]] = ..., accepts_batches: _Optional[bool] = ..., job_types: _Optional[_Iterable[str]] = ..., payloads_as_json: _Optional[bool] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ("job_id", "lease_token")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ...) -> None: ...

class WorkerHeartbeat(_message.Message):
    __slots__ = ("leases",)
    LEASES_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[Lease]
    def __init__(self, leases: _Optional[_Iterable[_Union[Lease, _Mapping]]] = ...) -> None: ...

class WorkerComplete(_message.Message):
    __slots__ = ("job_id", "lease_token", "result", "result_json")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    result: _struct_pb2.Struct
    result_json: bytes
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., result: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., result_json: _Optional[bytes] = ...) -> None: ...

class WorkerFail(_message.Message):
    __slots__ = ("job_id", "lease_token", "error", "non_retryable", "retry_at")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    NON_RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    RETRY_AT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    error: str
    non_retryable: bool
    retry_at: _timestamp_pb2.Timestamp
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., error: _Optional[str] = ..., non_retryable: _Optional[bool] = ..., retry_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class WorkerSnooze(_message.Message):
    __slots__ = ("job_id", "lease_token", "run_at")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RUN_AT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    run_at: _timestamp_pb2.Timestamp
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., run_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class WorkerProgress(_message.Message):
    __slots__ = ("job_id", "lease_token", "percent", "done", "total", "message", "checkpoint")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PERCENT_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    percent: float
    done: int
    total: int
    message: str
    checkpoint: _struct_pb2.Struct
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., percent: _Optional[float] = ..., done: _Optional[int] = ..., total: _Optional[int] = ..., message: _Optional[str] = ..., checkpoint: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class WorkerCompleteBatch(_message.Message):
    __slots__ = ("completes",)
    COMPLETES_FIELD_NUMBER: _ClassVar[int]
    completes: _containers.RepeatedCompositeFieldContainer[WorkerComplete]
    def __init__(self, completes: _Optional[_Iterable[_Union[WorkerComplete, _Mapping]]] = ...) -> None: ...

class WorkerFailBatch(_message.Message):
    __slots__ = ("fails",)
    FAILS_FIELD_NUMBER: _ClassVar[int]
    fails: _containers.RepeatedCompositeFieldContainer[WorkerFail]
    def __init__(self, fails: _Optional[_Iterable[_Union[WorkerFail, _Mapping]]] = ...) -> None: ...

class WorkerDrain(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ServerWelcome(_message.Message):
    __slots__ = ("session_id", "lease_seconds", "heartbeat_interval_seconds", "heartbeat_interval_ms", "accepts_batches", "payloads_as_json", "max_result_bytes", "max_message_bytes")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    ACCEPTS_BATCHES_FIELD_NUMBER: _ClassVar[int]
    PAYLOADS_AS_JSON_FIELD_NUMBER: _ClassVar[int]
    MAX_RESULT_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    lease_seconds: int
    heartbeat_interval_seconds: int
    heartbeat_interval_ms: int
    accepts_batches: bool
    payloads_as_json: bool
    max_result_bytes: int
    max_message_bytes: int
    def __init__(self, session_id: _Optional[str] = ..., lease_seconds: _Optional[int] = ..., heartbeat_interval_seconds: _Optional[int] = ..., heartbeat_interval_ms: _Optional[int] = ..., accepts_batches: _Optional[bool] = ..., payloads_as_json: _Optional[bool] = ..., max_result_bytes: _Optional[int] = ..., max_message_bytes: _Optional[int] = ...) -> None: ...

class LeasedJob(_message.Message):
    __slots__ = ("job", "lease_token", "lease_expires_at", "parent_results", "checkpoint", "payload_json")
    class ParentResultsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _struct_pb2.Struct
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...
    JOB_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    PARENT_RESULTS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    lease_token: str
    lease_expires_at: _timestamp_pb2.Timestamp
    parent_results: _containers.MessageMap[str, _struct_pb2.Struct]
    checkpoint: _struct_pb2.Struct
    payload_json: bytes
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., lease_token: _Optional[str] = ..., lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., parent_results: _Optional[_Mapping[str, _struct_pb2.Struct]] = ..., checkpoint: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., payload_json: _Optional[bytes] = ...) -> None: ...

class ServerAck(_message.Message):
    __slots__ = ("job_id", "accepted", "reason", "result", "lease_token", "database_unavailable")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    DATABASE_UNAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    accepted: bool
    reason: str
    result: AckResult
    lease_token: str
    database_unavailable: bool
    def __init__(self, job_id: _Optional[str] = ..., accepted: _Optional[bool] = ..., reason: _Optional[str] = ..., result: _Optional[_Union[AckResult, str]] = ..., lease_token: _Optional[str] = ..., database_unavailable: _Optional[bool] = ...) -> None: ...

class LeasedJobBatch(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[LeasedJob]
    def __init__(self, jobs: _Optional[_Iterable[_Union[LeasedJob, _Mapping]]] = ...) -> None: ...

class ServerAckBatch(_message.Message):
    __slots__ = ("acks",)
    ACKS_FIELD_NUMBER: _ClassVar[int]
    acks: _containers.RepeatedCompositeFieldContainer[ServerAck]
    def __init__(self, acks: _Optional[_Iterable[_Union[ServerAck, _Mapping]]] = ...) -> None: ...

class ServerCancel(_message.Message):
    __slots__ = ("job_id", "code")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    code: CancelReason
    def __init__(self, job_id: _Optional[str] = ..., code: _Optional[_Union[CancelReason, str]] = ...) -> None: ...

class ServerLeaseLost(_message.Message):
    __slots__ = ("job_id", "reason", "code", "lease_token")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    reason: str
    code: LeaseLostReason
    lease_token: str
    def __init__(self, job_id: _Optional[str] = ..., reason: _Optional[str] = ..., code: _Optional[_Union[LeaseLostReason, str]] = ..., lease_token: _Optional[str] = ...) -> None: ...

class ExtendedLease(_message.Message):
    __slots__ = ("job_id", "lease_token", "lease_expires_at", "cancel_requested")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    lease_expires_at: _timestamp_pb2.Timestamp
    cancel_requested: bool
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_requested: _Optional[bool] = ...) -> None: ...

class ServerHeartbeatAck(_message.Message):
    __slots__ = ("leases",)
    LEASES_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[ExtendedLease]
    def __init__(self, leases: _Optional[_Iterable[_Union[ExtendedLease, _Mapping]]] = ...) -> None: ...

class ServerDrain(_message.Message):
    __slots__ = ("reason", "code")
    REASON_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    reason: str
    code: DrainReason
    def __init__(self, reason: _Optional[str] = ..., code: _Optional[_Union[DrainReason, str]] = ...) -> None: ...

class ClaimJobsRequest(_message.Message):
    __slots__ = ("worker_id", "queues", "max", "wait", "job_types")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPES_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    queues: _containers.RepeatedScalarFieldContainer[str]
    max: int
    wait: _duration_pb2.Duration
    job_types: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, worker_id: _Optional[str] = ..., queues: _Optional[_Iterable[str]] = ..., max: _Optional[int] = ..., wait: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., job_types: _Optional[_Iterable[str]] = ...) -> None: ...

class ClaimJobsResponse(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[LeasedJob]
    def __init__(self, jobs: _Optional[_Iterable[_Union[LeasedJob, _Mapping]]] = ...) -> None: ...

class ExtendLeaseRequest(_message.Message):
    __slots__ = ("job_id", "lease_token")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ...) -> None: ...

class ExtendLeaseResponse(_message.Message):
    __slots__ = ("lease_expires_at", "cancel_requested")
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    lease_expires_at: _timestamp_pb2.Timestamp
    cancel_requested: bool
    def __init__(self, lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_requested: _Optional[bool] = ...) -> None: ...

class CompleteJobRequest(_message.Message):
    __slots__ = ("job_id", "lease_token", "result", "result_json")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    result: _struct_pb2.Struct
    result_json: bytes
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., result: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., result_json: _Optional[bytes] = ...) -> None: ...

class CompleteJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class FailJobRequest(_message.Message):
    __slots__ = ("job_id", "lease_token", "error", "non_retryable", "retry_at")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    NON_RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    RETRY_AT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    error: str
    non_retryable: bool
    retry_at: _timestamp_pb2.Timestamp
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., error: _Optional[str] = ..., non_retryable: _Optional[bool] = ..., retry_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class FailJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class SnoozeJobRequest(_message.Message):
    __slots__ = ("job_id", "lease_token", "run_at")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RUN_AT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    run_at: _timestamp_pb2.Timestamp
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., run_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SnoozeJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class ReportProgressRequest(_message.Message):
    __slots__ = ("job_id", "lease_token", "percent", "done", "total", "message", "checkpoint")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PERCENT_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    percent: float
    done: int
    total: int
    message: str
    checkpoint: _struct_pb2.Struct
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., percent: _Optional[float] = ..., done: _Optional[int] = ..., total: _Optional[int] = ..., message: _Optional[str] = ..., checkpoint: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ReportProgressResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListWorkersRequest(_message.Message):
    __slots__ = ("queue",)
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class ListWorkersResponse(_message.Message):
    __slots__ = ("workers",)
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedCompositeFieldContainer[WorkerInfo]
    def __init__(self, workers: _Optional[_Iterable[_Union[WorkerInfo, _Mapping]]] = ...) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ("worker_id", "session_id", "server_id", "server_address", "queues", "job_types", "slots", "held_jobs", "connected_at", "last_seen_at")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    SERVER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPES_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    HELD_JOBS_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_AT_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    session_id: str
    server_id: str
    server_address: str
    queues: _containers.RepeatedScalarFieldContainer[str]
    job_types: _containers.RepeatedScalarFieldContainer[str]
    slots: int
    held_jobs: int
    connected_at: _timestamp_pb2.Timestamp
    last_seen_at: _timestamp_pb2.Timestamp
    def __init__(self, worker_id: _Optional[str] = ..., session_id: _Optional[str] = ..., server_id: _Optional[str] = ..., server_address: _Optional[str] = ..., queues: _Optional[_Iterable[str]] = ..., job_types: _Optional[_Iterable[str]] = ..., slots: _Optional[int] = ..., held_jobs: _Optional[int] = ..., connected_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_seen_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
