/**
 * Who is looking: GET /v1/caller says whether auth is on and the token's role. Only an admin
 * (or anyone while auth is off, where the server treats callers as admins) gets action
 * buttons; `useCanAct()` is the single switch every action control reads, so a viewer sees
 * no action at all. The token form appears after any 401 and keeps the token in
 * sessionStorage (this tab only).
 */
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, useSyncExternalStore, type FormEvent } from 'react';
import { api, getToken, isAuthRequired, requireAuth, setToken, subscribeAuth } from './api';
import { enumLabel } from './format';
import type { Caller } from './types';

/** How often the caller is asked while it has no answer: as often as the live views poll (queries.ts LIVE_MS). */
const CALLER_RETRY_MS = 2000;

/**
 * The caller query (refreshed rarely once known: a role does not change under a token).
 * Until it has an answer it is asked again every CALLER_RETRY_MS: a page opened while the server was
 * starting (503) or down would otherwise give up after its retries and show no action button,
 * and the failed line, for as long as the tab stayed open, while every other view recovered.
 */
export function useCaller() {
  const required = useAuthRequired();
  return useQuery({
    queryKey: ['caller'],
    queryFn: ({ signal }) => api<Caller>('GET', '/caller', { signal }),
    staleTime: 60_000,
    refetchInterval: (query) => (query.state.data ? false : CALLER_RETRY_MS),
    enabled: !required,
  });
}

/** True when the caller may use actions (admin, or auth off); false while unknown. */
export function useCanAct(): boolean {
  const { data } = useCaller();
  if (!data) return false;
  // proto3 JSON leaves out a false bool: no authOn means auth is off.
  return !data.authOn || data.role === 'TOKEN_ROLE_ADMIN';
}

/** Re-renders on auth changes (a 401, a new token, sign out). */
export function useAuthRequired(): boolean {
  return useSyncExternalStore(subscribeAuth, isAuthRequired);
}

/** Re-renders when the stored token changes. */
export function useToken(): string | null {
  return useSyncExternalStore(subscribeAuth, getToken);
}

/**
 * What a token may be made of: printable ASCII without spaces (Evora's own are letters,
 * digits and - . _ ~ + / =). A browser cannot send some other characters in a header at all
 * (a typographic quote pasted with the token): every request would fail before reaching the
 * server and each page would say the server cannot be reached.
 */
const TOKEN_TEXT = /^[!-~]+$/;

/** The token prompt: a password field, submitted with Enter. */
export function TokenForm() {
  const queryClient = useQueryClient();
  const [value, setValue] = useState('');
  const [invalid, setInvalid] = useState(false);
  const refused = getToken() !== null;
  function submit(event: FormEvent) {
    event.preventDefault();
    const token = value.trim();
    if (!token) return;
    if (!TOKEN_TEXT.test(token)) {
      setInvalid(true);
      return;
    }
    setInvalid(false);
    setToken(token);
    requireAuth(false);
    setValue('');
    void queryClient.invalidateQueries();
  }
  return (
    <form className="token-form" onSubmit={submit} data-testid="token-form">
      <h1>Sign in</h1>
      <p>This server requires an API token (Authorization: Bearer). It is kept for this tab only.</p>
      {refused && !invalid && (
        <p className="error-line" role="alert" data-testid="token-refused">
          The server refused the token: enter another.
        </p>
      )}
      {invalid && (
        <p className="error-line" role="alert" data-testid="token-invalid">
          That is not a token: it has a space or a character no token has (a token is letters, digits and - . _ ~ + / =). Paste it
          again as plain text.
        </p>
      )}
      <label>
        Token
        <input
          type="password"
          autoComplete="current-password"
          value={value}
          onChange={(e) => setValue(e.target.value)}
          data-testid="token-input"
          autoFocus
          required
        />
      </label>
      <button type="submit" data-testid="token-submit">
        Sign in
      </button>
    </form>
  );
}

/**
 * The caller's name and role in the header, and "sign out" when a token is stored; neither
 * while the server refuses the token (the token form is up): the last caller read would
 * name a token that no longer works.
 */
export function CallerBadge() {
  const queryClient = useQueryClient();
  const token = useToken();
  const required = useAuthRequired();
  const { data: caller } = useCaller();
  const data = required ? undefined : caller;
  function signOut() {
    setToken(null);
    queryClient.clear();
    requireAuth(true);
  }
  return (
    <div className="caller">
      {data && (
        <span data-testid="caller-role">
          {!data.authOn ? 'auth off' : `${data.name || (data.kind ? enumLabel(data.kind, 'AUDIT_ACTOR_KIND_') : 'caller')} · ${enumLabel(data.role, 'TOKEN_ROLE_')}`}
        </span>
      )}
      {token && !required && (
        <button type="button" className="link-button" onClick={signOut} data-testid="sign-out">
          Sign out
        </button>
      )}
    </div>
  );
}
