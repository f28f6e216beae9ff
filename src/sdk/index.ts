/**
 * Evora's TypeScript SDK: `EvoraClient` for producers and operators, `EvoraWorker` for
 * workers. It talks to the server over gRPC only (generated stubs in src/gen) and never
 * imports server code. Guide: docs/sdk.md.
 */
export { EvoraClient } from './client.js';
export type { CallOptions, EvoraClientOptions, JobPage, ListJobsFilter, QueueSettings, SubmitIdsResult, SubmitJobInput, SubmitResult } from './client.js';
export type { BulkCallOptions, BulkCount, BulkJobFilter, DeadLetterGroupList } from './client.js';
export type { AuditEventPage, CreateTokenInput, ListAuditEventsFilter } from './client.js';
export { AUDIT_ACTIONS, TOKEN_ROLES } from './types.js';
export type { AuditActionName, AuditActorKindName, AuditEvent, Caller, Token, TokenRoleName } from './types.js';
export type { DeadLetterGroup, QueueSeriesPoint, WorkerInfo } from './types.js';
export { EvoraWorker } from './worker/evora-worker.js';
export type {
  AckResultName,
  DrainCause,
  EvoraWorkerOptions,
  JobContext,
  JobHandler,
  JobOutcome,
  StopResult,
  WorkerEvents,
  WorkerLogger,
  WorkerSessionInfo,
  WorkerStats,
} from './worker/types.js';
export { addressWithPort, DEFAULT_ADDRESS, DEFAULT_PORT, tokenFileRead } from './connection.js';
export type { ConnectionOptions } from './connection.js';
export { EvoraApiError, JobAbortedError, NonRetryableError, RetryAtError, SnoozeError, StatusCode, statusName } from './errors.js';
export type { AbortCause, StatusName } from './errors.js';
export { BACKOFF_KINDS, JOB_STATES, MISFIRE_POLICIES, jobStateParse } from './types.js';
export type {
  Backoff,
  BackoffKindName,
  Job,
  JobStateName,
  JsonObject,
  JsonValue,
  MisfirePolicyName,
  Percentiles,
  Queue,
  QueueStats,
  RateLimit,
  Schedule,
  ScheduleInput,
} from './types.js';
export type { AttemptOutcomeName, JobAttempt, JobDetails, JobProgress, ProgressInput } from './types.js';
export { PROGRESS_MESSAGE_MAX } from './types.js';
