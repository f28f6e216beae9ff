import type { AuditAction } from '../domain/audit.js';
import { auditPageTokenDecode, auditPageTokenEncode, checkAuditPageSize } from '../domain/validate-admin.js';
import { checkNoNul } from '../domain/validate.js';
import { AuditServiceService as M, type AuditServiceServer } from '../gen/evora/v1/auth.js';
import { auditActionFromPb, auditEventToPb } from './convert.js';
import type { ServiceDeps } from './deps.js';
import { unary } from './unary.js';

/**
 * AuditService: reads the audit log, newest first, a page at a time (keyset on the event
 * id, carried by an opaque page token). The log is written by the store with each change.
 */
export function auditService(deps: ServiceDeps): AuditServiceServer {
  const { store } = deps;
  return {
    listAuditEvents: unary(deps, M.listAuditEvents.path, async (req) => {
      const limit = checkAuditPageSize(req.pageSize);
      const beforeId = auditPageTokenDecode(req.pageToken);
      // UNSPECIFIED (or a value this server does not know) matches nothing.
      const actions = req.actions.map(auditActionFromPb).filter((a): a is AuditAction => a !== undefined);
      if (req.actions.length > 0 && actions.length === 0) return { events: [], nextPageToken: '' };
      const page = await store.auditList({
        actions: actions.length > 0 ? actions : null,
        target: req.target ? checkNoNul('target', req.target) : null,
        token: req.token ? checkNoNul('token', req.token) : null,
        beforeId,
        limit,
      });
      return { events: page.events.map(auditEventToPb), nextPageToken: auditPageTokenEncode(page.nextBeforeId) };
    }),
  };
}
