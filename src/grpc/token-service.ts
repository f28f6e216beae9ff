import { tokenIssue } from '../auth/token-issue.js';
import { auditActor } from '../domain/audit.js';
import { failedPrecondition } from '../domain/errors.js';
import { checkTokenRef } from '../domain/validate-admin.js';
import { TokenServiceService as M, type TokenServiceServer } from '../gen/evora/v1/auth.js';
import { callerToPb, durationToSeconds, tokenRoleFromPb, tokenToPb } from './convert.js';
import type { ServiceDeps } from './deps.js';
import { unary } from './unary.js';

/**
 * TokenService: operators make, list and revoke API tokens. The secret is made by
 * tokenIssue and returned once by CreateToken; only its hash reaches the store. Every create and revoke is
 * audited by the store in the same statement. Log lines name tokens, never secrets.
 */
export function tokenService(deps: ServiceDeps): TokenServiceServer {
  const { store, logger } = deps;
  return {
    createToken: unary(deps, M.createToken.path, async (req, _call, principal) => {
      const role = tokenRoleFromPb(req.role);
      // An anonymous caller exists only while auth is off (no token yet): the token it makes
      // turns auth on for everyone, and one that is not an admin would leave no caller able to
      // manage tokens through the server.
      if (principal.kind === 'anonymous' && role !== undefined && role !== 'admin') {
        throw failedPrecondition(
          `auth is off (no token exists), and the first token turns it on for every caller: make it an admin token, or no one could manage tokens through the server (a ${role} token can be made first with \`evora token create --database-url\`)`,
        );
      }
      const { token, secret } = await tokenIssue(
        store,
        {
          name: req.name,
          role,
          queues: req.queues,
          expiresInSeconds: req.expiresIn ? durationToSeconds(req.expiresIn) : null,
        },
        auditActor(principal),
      );
      logger.info({ token: token.id, name: token.name, role: token.role }, 'token created');
      return { token: tokenToPb(token), secret };
    }),
    listTokens: unary(deps, M.listTokens.path, async (req) => ({
      tokens: (await store.tokenList({ includeRevoked: req.includeRevoked })).map(tokenToPb),
    })),
    getCaller: unary(deps, M.getCaller.path, async (_req, _call, principal) => callerToPb(principal, deps.auth.authOn)),
    revokeToken: unary(deps, M.revokeToken.path, async (req, _call, principal) => {
      const ref = checkTokenRef(req.token);
      const actor = auditActor(principal);
      const token = await store.tokenRevoke({ token: ref, actor });
      logger.info({ token: token.id, name: token.name }, 'token revoked');
      return { token: tokenToPb(token) };
    }),
  };
}
