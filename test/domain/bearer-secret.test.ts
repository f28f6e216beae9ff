import { describe, expect, it } from 'vitest';
import { bearerSecret, MAX_SECRET_LENGTH, MIN_SECRET_LENGTH } from '../../src/domain/auth.js';

/** The `authorization` header's parse: each refusal says what is wrong, never what was sent. */
describe('bearerSecret', () => {
  const secret = 'a'.repeat(MIN_SECRET_LENGTH);
  const refusal = (header: string | undefined) => {
    try {
      bearerSecret(header);
    } catch (err) {
      return (err as Error).message;
    }
    return null;
  };

  it('takes "Bearer <token>" in any case of the scheme', () => {
    expect(bearerSecret(`Bearer ${secret}`)).toBe(secret);
    expect(bearerSecret(`bearer  ${secret}`)).toBe(secret);
  });

  it('tells a missing or malformed header from a token that cannot be an Evora token', () => {
    expect(refusal(undefined)).toBe('a token is required: send "authorization: Bearer <token>"');
    expect(refusal(`Basic ${secret}`)).toBe('the authorization header is malformed: expected "Bearer <token>"');
    expect(refusal('Bearer')).toBe('the authorization header is malformed: expected "Bearer <token>"');
    const tokenMalformed = `the token is malformed: an Evora token is ${MIN_SECRET_LENGTH} to ${MAX_SECRET_LENGTH} characters of letters, digits and - . _ ~ + / (and = at the end)`;
    expect(refusal('Bearer bogus')).toBe(tokenMalformed);
    expect(refusal(`Bearer ${secret}!`)).toBe(tokenMalformed);
    expect(refusal(`Bearer ${'a'.repeat(MAX_SECRET_LENGTH + 1)}`)).toBe(tokenMalformed);
  });
});
