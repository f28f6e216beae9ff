import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BackoffKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BACKOFF_KIND_UNSPECIFIED: _ClassVar[BackoffKind]
    BACKOFF_KIND_EXPONENTIAL: _ClassVar[BackoffKind]
    BACKOFF_KIND_LINEAR: _ClassVar[BackoffKind]
    BACKOFF_KIND_FIXED: _ClassVar[BackoffKind]
BACKOFF_KIND_UNSPECIFIED: BackoffKind
BACKOFF_KIND_EXPONENTIAL: BackoffKind
BACKOFF_KIND_LINEAR: BackoffKind
BACKOFF_KIND_FIXED: BackoffKind

class Backoff(_message.Message):
    __slots__ = ("kind", "base", "cap", "jitter")
    KIND_FIELD_NUMBER: _ClassVar[int]
    BASE_FIELD_NUMBER: _ClassVar[int]
    CAP_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIELD_NUMBER: _ClassVar[int]
    kind: BackoffKind
    base: _duration_pb2.Duration
    cap: _duration_pb2.Duration
    jitter: float
    def __init__(self, kind: _Optional[_Union[BackoffKind, str]] = ..., base: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., cap: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., jitter: _Optional[float] = ...) -> None: ...

class Queue(_message.Message):
    __slots__ = ("name", "max_attempts", "backoff", "lease_seconds", "paused", "max_concurrency", "created_at", "updated_at", "completed_retention", "cancelled_retention", "dlq_retention", "rate_limit", "attempt_timeout", "max_concurrency_per_key", "delete_on_complete")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_FIELD_NUMBER: _ClassVar[int]
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_RETENTION_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_RETENTION_FIELD_NUMBER: _ClassVar[int]
    DLQ_RETENTION_FIELD_NUMBER: _ClassVar[int]
    RATE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_PER_KEY_FIELD_NUMBER: _ClassVar[int]
    DELETE_ON_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    name: str
    max_attempts: int
    backoff: Backoff
    lease_seconds: int
    paused: bool
    max_concurrency: int
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    completed_retention: _duration_pb2.Duration
    cancelled_retention: _duration_pb2.Duration
    dlq_retention: _duration_pb2.Duration
    rate_limit: RateLimit
    attempt_timeout: _duration_pb2.Duration
    max_concurrency_per_key: int
    delete_on_complete: bool
    def __init__(self, name: _Optional[str] = ..., max_attempts: _Optional[int] = ..., backoff: _Optional[_Union[Backoff, _Mapping]] = ..., lease_seconds: _Optional[int] = ..., paused: _Optional[bool] = ..., max_concurrency: _Optional[int] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., completed_retention: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., cancelled_retention: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., dlq_retention: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., rate_limit: _Optional[_Union[RateLimit, _Mapping]] = ..., attempt_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_concurrency_per_key: _Optional[int] = ..., delete_on_complete: _Optional[bool] = ...) -> None: ...

class RateLimit(_message.Message):
    __slots__ = ("per_second", "burst")
    PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    per_second: float
    burst: int
    def __init__(self, per_second: _Optional[float] = ..., burst: _Optional[int] = ...) -> None: ...

class UpsertQueueRequest(_message.Message):
    __slots__ = ("name", "max_attempts", "backoff", "lease_seconds", "max_concurrency", "completed_retention", "cancelled_retention", "dlq_retention", "rate_limit", "attempt_timeout", "max_concurrency_per_key", "delete_on_complete")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_FIELD_NUMBER: _ClassVar[int]
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_RETENTION_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_RETENTION_FIELD_NUMBER: _ClassVar[int]
    DLQ_RETENTION_FIELD_NUMBER: _ClassVar[int]
    RATE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_PER_KEY_FIELD_NUMBER: _ClassVar[int]
    DELETE_ON_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    name: str
    max_attempts: int
    backoff: Backoff
    lease_seconds: int
    max_concurrency: int
    completed_retention: _duration_pb2.Duration
    cancelled_retention: _duration_pb2.Duration
    dlq_retention: _duration_pb2.Duration
    rate_limit: RateLimit
    attempt_timeout: _duration_pb2.Duration
    max_concurrency_per_key: int
    delete_on_complete: bool
    def __init__(self, name: _Optional[str] = ..., max_attempts: _Optional[int] = ..., backoff: _Optional[_Union[Backoff, _Mapping]] = ..., lease_seconds: _Optional[int] = ..., max_concurrency: _Optional[int] = ..., completed_retention: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., cancelled_retention: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., dlq_retention: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., rate_limit: _Optional[_Union[RateLimit, _Mapping]] = ..., attempt_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_concurrency_per_key: _Optional[int] = ..., delete_on_complete: _Optional[bool] = ...) -> None: ...

class UpsertQueueResponse(_message.Message):
    __slots__ = ("queue", "created")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    queue: Queue
    created: bool
    def __init__(self, queue: _Optional[_Union[Queue, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class GetQueueRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetQueueResponse(_message.Message):
    __slots__ = ("queue",)
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: Queue
    def __init__(self, queue: _Optional[_Union[Queue, _Mapping]] = ...) -> None: ...

class ListQueuesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListQueuesResponse(_message.Message):
    __slots__ = ("queues",)
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedCompositeFieldContainer[Queue]
    def __init__(self, queues: _Optional[_Iterable[_Union[Queue, _Mapping]]] = ...) -> None: ...

class PauseQueueRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class PauseQueueResponse(_message.Message):
    __slots__ = ("queue",)
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: Queue
    def __init__(self, queue: _Optional[_Union[Queue, _Mapping]] = ...) -> None: ...

class DeleteQueueRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteQueueResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ResumeQueueRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ResumeQueueResponse(_message.Message):
    __slots__ = ("queue",)
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: Queue
    def __init__(self, queue: _Optional[_Union[Queue, _Mapping]] = ...) -> None: ...

class Percentiles(_message.Message):
    __slots__ = ("p50_ms", "p95_ms", "p99_ms")
    P50_MS_FIELD_NUMBER: _ClassVar[int]
    P95_MS_FIELD_NUMBER: _ClassVar[int]
    P99_MS_FIELD_NUMBER: _ClassVar[int]
    p50_ms: float
    p95_ms: float
    p99_ms: float
    def __init__(self, p50_ms: _Optional[float] = ..., p95_ms: _Optional[float] = ..., p99_ms: _Optional[float] = ...) -> None: ...

class Throughput(_message.Message):
    __slots__ = ("last_1m", "last_5m", "last_60m")
    LAST_1M_FIELD_NUMBER: _ClassVar[int]
    LAST_5M_FIELD_NUMBER: _ClassVar[int]
    LAST_60M_FIELD_NUMBER: _ClassVar[int]
    last_1m: float
    last_5m: float
    last_60m: float
    def __init__(self, last_1m: _Optional[float] = ..., last_5m: _Optional[float] = ..., last_60m: _Optional[float] = ...) -> None: ...

class QueueStats(_message.Message):
    __slots__ = ("queue", "pending", "running", "completed", "dlq", "cancelled", "throughput", "wait", "run", "failure_rate", "connected_workers", "free_slots", "submitted_60m", "completed_60m", "failed_60m", "dead_lettered_60m", "outbox_lag_events", "waiting", "outbox_lag_estimated")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    DLQ_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    THROUGHPUT_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    FAILURE_RATE_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_WORKERS_FIELD_NUMBER: _ClassVar[int]
    FREE_SLOTS_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_60M_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_60M_FIELD_NUMBER: _ClassVar[int]
    FAILED_60M_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTERED_60M_FIELD_NUMBER: _ClassVar[int]
    OUTBOX_LAG_EVENTS_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    OUTBOX_LAG_ESTIMATED_FIELD_NUMBER: _ClassVar[int]
    queue: str
    pending: int
    running: int
    completed: int
    dlq: int
    cancelled: int
    throughput: Throughput
    wait: Percentiles
    run: Percentiles
    failure_rate: float
    connected_workers: int
    free_slots: int
    submitted_60m: int
    completed_60m: int
    failed_60m: int
    dead_lettered_60m: int
    outbox_lag_events: int
    waiting: int
    outbox_lag_estimated: bool
    def __init__(self, queue: _Optional[str] = ..., pending: _Optional[int] = ..., running: _Optional[int] = ..., completed: _Optional[int] = ..., dlq: _Optional[int] = ..., cancelled: _Optional[int] = ..., throughput: _Optional[_Union[Throughput, _Mapping]] = ..., wait: _Optional[_Union[Percentiles, _Mapping]] = ..., run: _Optional[_Union[Percentiles, _Mapping]] = ..., failure_rate: _Optional[float] = ..., connected_workers: _Optional[int] = ..., free_slots: _Optional[int] = ..., submitted_60m: _Optional[int] = ..., completed_60m: _Optional[int] = ..., failed_60m: _Optional[int] = ..., dead_lettered_60m: _Optional[int] = ..., outbox_lag_events: _Optional[int] = ..., waiting: _Optional[int] = ..., outbox_lag_estimated: _Optional[bool] = ...) -> None: ...

class GetQueueStatsRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetQueueStatsResponse(_message.Message):
    __slots__ = ("stats",)
    STATS_FIELD_NUMBER: _ClassVar[int]
    stats: QueueStats
    def __init__(self, stats: _Optional[_Union[QueueStats, _Mapping]] = ...) -> None: ...

class ListQueueStatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListQueueStatsResponse(_message.Message):
    __slots__ = ("stats",)
    STATS_FIELD_NUMBER: _ClassVar[int]
    stats: _containers.RepeatedCompositeFieldContainer[QueueStats]
    def __init__(self, stats: _Optional[_Iterable[_Union[QueueStats, _Mapping]]] = ...) -> None: ...

class GetQueueSeriesRequest(_message.Message):
    __slots__ = ("queue", "minutes")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    MINUTES_FIELD_NUMBER: _ClassVar[int]
    queue: str
    minutes: int
    def __init__(self, queue: _Optional[str] = ..., minutes: _Optional[int] = ...) -> None: ...

class GetQueueSeriesResponse(_message.Message):
    __slots__ = ("points",)
    POINTS_FIELD_NUMBER: _ClassVar[int]
    points: _containers.RepeatedCompositeFieldContainer[QueueSeriesPoint]
    def __init__(self, points: _Optional[_Iterable[_Union[QueueSeriesPoint, _Mapping]]] = ...) -> None: ...

class QueueSeriesPoint(_message.Message):
    __slots__ = ("minute", "submitted", "completed", "failed", "dead_lettered", "wait_p50_ms", "wait_p95_ms", "wait_p99_ms", "run_p50_ms", "run_p95_ms", "run_p99_ms")
    MINUTE_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTERED_FIELD_NUMBER: _ClassVar[int]
    WAIT_P50_MS_FIELD_NUMBER: _ClassVar[int]
    WAIT_P95_MS_FIELD_NUMBER: _ClassVar[int]
    WAIT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    RUN_P50_MS_FIELD_NUMBER: _ClassVar[int]
    RUN_P95_MS_FIELD_NUMBER: _ClassVar[int]
    RUN_P99_MS_FIELD_NUMBER: _ClassVar[int]
    minute: _timestamp_pb2.Timestamp
    submitted: int
    completed: int
    failed: int
    dead_lettered: int
    wait_p50_ms: float
    wait_p95_ms: float
    wait_p99_ms: float
    run_p50_ms: float
    run_p95_ms: float
    run_p99_ms: float
    def __init__(self, minute: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., submitted: _Optional[int] = ..., completed: _Optional[int] = ..., failed: _Optional[int] = ..., dead_lettered: _Optional[int] = ..., wait_p50_ms: _Optional[float] = ..., wait_p95_ms: _Optional[float] = ..., wait_p99_ms: _Optional[float] = ..., run_p50_ms: _Optional[float] = ..., run_p95_ms: _Optional[float] = ..., run_p99_ms: _Optional[float] = ...) -> None: ...
