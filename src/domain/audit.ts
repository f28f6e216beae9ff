import type { JsonObject } from './job.js';
import type { Principal, PrincipalKind } from './auth.js';

/**
 * The audit log: every administrative change, with who made it, written by the store in
 * the same transaction as the change (so the log holds exactly what committed). The
 * actions are AuditAction in proto/evora/v1/auth.proto.
 */

/** An administrative change. */
export type AuditAction =
  | 'queue.upsert'
  | 'queue.pause'
  | 'queue.resume'
  | 'job.cancel'
  | 'job.retry'
  | 'jobs.retry'
  | 'jobs.purge'
  | 'schedule.upsert'
  | 'schedule.delete'
  | 'schedule.pause'
  | 'schedule.resume'
  | 'schedule.trigger'
  | 'token.create'
  | 'token.revoke'
  | 'jobs.cancel'
  | 'queue.delete';

/** Every action, in the proto enum's order. */
export const AUDIT_ACTIONS: readonly AuditAction[] = [
  'queue.upsert',
  'queue.pause',
  'queue.resume',
  'job.cancel',
  'job.retry',
  'jobs.retry',
  'jobs.purge',
  'schedule.upsert',
  'schedule.delete',
  'schedule.pause',
  'schedule.resume',
  'schedule.trigger',
  'token.create',
  'token.revoke',
  'jobs.cancel',
  'queue.delete',
];

/** Who made a change, as the log keeps it. */
export interface AuditActor {
  kind: PrincipalKind;
  tokenId: string | null;
  /** Token name; for 'database' "role (user)"; '' for 'anonymous'. */
  name: string;
}

/** The actor of a principal's changes. */
export function auditActor(p: Principal): AuditActor {
  return { kind: p.kind, tokenId: p.tokenId, name: p.name };
}

/** One logged change. */
export interface AuditEvent {
  id: number;
  at: Date;
  actor: AuditActor;
  action: AuditAction;
  target: string;
  /** What changed (never a secret). */
  change: JsonObject;
}

/** Filter and page of a read of the log, newest first. */
export interface AuditListParams {
  actions: AuditAction[] | null;
  target: string | null;
  /** Token id or name. */
  token: string | null;
  /** Events with an id below this one (the previous page's last); null: the newest. */
  beforeId: number | null;
  limit: number;
}
