import type pg from 'pg';
import type { StorePool } from './pool.js';
import { ANONYMOUS, type PrincipalKind } from '../domain/auth.js';
import { auditActor, type AuditAction, type AuditActor, type AuditEvent, type AuditListParams } from '../domain/audit.js';
import type { JsonObject } from '../domain/job.js';
import { rowOf, rowsOf, statement } from './statements.js';

/**
 * The audit log (evora.audit_events): the actor parameters every audited statement takes,
 * the insert of an action made of several statements (run in that action's transaction),
 * the paged read, and retention's batch delete. Single-statement actions write their event in their own statement
 * (an `audited` CTE), so the log holds exactly what committed.
 */

/** The actor parameters of every audited statement (`:actorKind`, `:actorTokenId`, `:actorName`). */
export interface ActorParams {
  actorKind: PrincipalKind;
  actorTokenId: string | null;
  actorName: string;
}

/** Their declared types, spread into each audited statement's declaration. */
export const ACTOR_TYPES = { actorKind: 'text', actorTokenId: 'uuid', actorName: 'text' } as const;

/** The actor parameters of `actor`; absent: the anonymous caller (an event is always written). */
export function actorParams(actor: AuditActor | undefined): ActorParams {
  const a = actor ?? auditActor(ANONYMOUS);
  return { actorKind: a.kind, actorTokenId: a.tokenId, actorName: a.name };
}

interface AuditInsertParams extends ActorParams {
  action: AuditAction;
  target: string;
  change: string;
  now: Date | null;
}
const auditInsertSql = statement<AuditInsertParams, { id: string }>(
  'audit-insert',
  { ...ACTOR_TYPES, action: 'text', target: 'text', change: 'jsonb', now: 'timestamptz' },
  { id: 'int8' },
);

/**
 * Writes one event on `client`, inside the caller's transaction (after its change
 * succeeded): it commits or rolls back with the change.
 */
export async function auditInsertInTransaction(
  client: pg.ClientBase,
  params: { actor: AuditActor | undefined; action: AuditAction; target: string; change: JsonObject; now: Date | null },
): Promise<void> {
  await rowOf(client, auditInsertSql, {
    ...actorParams(params.actor),
    action: params.action,
    target: params.target,
    change: JSON.stringify(params.change),
    now: params.now,
  });
}

interface AuditRow {
  /** int8: pg hands it over as a string. */
  id: string;
  at: Date;
  actor_kind: PrincipalKind;
  token_id: string | null;
  token_name: string;
  action: AuditAction;
  target: string;
  change: JsonObject;
}
const auditListSql = statement<
  { actions: string[] | null; target: string | null; token: string | null; beforeId: number | null; limit: number },
  AuditRow
>(
  'audit-list',
  { actions: 'text[]', target: 'text', token: 'text', beforeId: 'int8', limit: 'int8' },
  { id: 'int8', at: 'timestamptz', actor_kind: 'text', token_id: 'uuid', token_name: 'text', action: 'text', target: 'text', change: 'jsonb' },
);

/** A page of the log, newest first (Store.auditList); `nextBeforeId` is null on the last page. */
export async function auditList(pool: StorePool, params: AuditListParams): Promise<{ events: AuditEvent[]; nextBeforeId: number | null }> {
  const rows = await rowsOf(pool, auditListSql, {
    actions: params.actions && params.actions.length > 0 ? params.actions : null,
    target: params.target || null,
    token: params.token || null,
    beforeId: params.beforeId,
    limit: params.limit + 1,
  });
  const events = rows.slice(0, params.limit).map(
    (r): AuditEvent => ({
      id: Number(r.id),
      at: r.at,
      actor: { kind: r.actor_kind, tokenId: r.token_id, name: r.token_name },
      action: r.action,
      target: r.target,
      change: r.change,
    }),
  );
  return { events, nextBeforeId: rows.length > params.limit ? (events[events.length - 1]?.id ?? null) : null };
}

const auditPruneSql = statement<{ retentionDays: number; limit: number; now: Date | null }, { events: number }>(
  'audit-prune',
  { retentionDays: 'int4', limit: 'int4', now: 'timestamptz' },
  { events: 'int4' },
);

/** One batch of audit retention (Store.auditPrune): how many events it deleted. */
export async function auditPrune(pool: StorePool, params: { retentionDays: number; limit: number; now: Date | null }): Promise<number> {
  const row = await rowOf(pool, auditPruneSql, params);
  return row?.events ?? 0;
}
