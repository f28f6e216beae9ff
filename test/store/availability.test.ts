import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { EvoraError, isUnavailable, notFound, unavailable } from '../../src/domain/errors.js';
import { DatabaseAvailability, databaseUnavailableReason, REFUSAL_LOG_INTERVAL_MS } from '../../src/store/availability.js';

/** An error as pg or Node reports it: a message and the fields they set. */
function errorWith(message: string, fields: Record<string, unknown> = {}): Error {
  return Object.assign(new Error(message), fields);
}

describe('databaseUnavailableReason: which failures are an outage', () => {
  it.each([
    ['pg_terminate_backend / fast shutdown', errorWith('terminating connection due to administrator command', { code: '57P01' }), 'terminating connection due to administrator command'],
    ['another backend crashed', errorWith('terminating connection because of crash of another server process', { code: '57P02' }), 'terminating connection because of crash of another server process'],
    ['recovery', errorWith('the database system is in recovery mode', { code: '57P03' }), 'the database system is in recovery mode'],
    ['starting up', errorWith('the database system is starting up', { code: '57P03' }), 'the database system is starting up'],
    ['too many connections', errorWith('sorry, too many clients already', { code: '53300' }), 'sorry, too many clients already'],
    ['disk full', errorWith('could not extend file: No space left on device', { code: '53100' }), 'could not extend file: No space left on device'],
    ['an idle session ended by the server', errorWith('terminating connection due to idle-session timeout', { code: '57P05' }), 'terminating connection due to idle-session timeout'],
    ['SQLSTATE class 08', errorWith('connection failure', { code: '08006' }), 'connection failure'],
    ['refused', errorWith('connect ECONNREFUSED 127.0.0.1:5432', { code: 'ECONNREFUSED', address: '127.0.0.1', port: 5432 }), 'connection refused (127.0.0.1:5432)'],
    ['refused, dual stack (no message)', errorWith('', { code: 'ECONNREFUSED' }), 'connection refused'],
    ['reset', errorWith('read ECONNRESET', { code: 'ECONNRESET' }), 'connection reset'],
    ['socket closed under a query', errorWith('Connection terminated unexpectedly'), 'Connection terminated unexpectedly'],
    ['pool connect timeout', errorWith('timeout exceeded when trying to connect'), 'timeout exceeded when trying to connect'],
    ['a pg.Client connect timeout (the LISTEN connection)', errorWith('timeout expired'), 'timeout expired'],
    ['a client whose connection failed', errorWith('Client has encountered a connection error and is not queryable'), 'Client has encountered a connection error and is not queryable'],
    ['wrapped (a cause chain)', new Error('migration failed: x', { cause: errorWith('the database system is shutting down', { code: '57P03' }) }), 'the database system is shutting down'],
    ['an UNAVAILABLE made from a driver error: its reason', unavailable('database unavailable: connection reset', { cause: errorWith('read ECONNRESET', { code: 'ECONNRESET' }) }), 'connection reset'],
    ['an UNAVAILABLE of its own: its message', unavailable('a parent job stayed locked by other writes; try the submit again'), 'a parent job stayed locked by other writes; try the submit again'],
  ])('%s', (_what, err, reason) => {
    expect(databaseUnavailableReason(err)).toBe(reason);
  });

  it.each([
    ['a constraint violation', errorWith('duplicate key value violates unique constraint', { code: '23505' })],
    ['a wrong password', errorWith('password authentication failed for user "postgres"', { code: '28P01' })],
    ['an unknown database', errorWith('database "nope" does not exist', { code: '3D000' })],
    ['a query cancelled', errorWith('canceling statement due to user request', { code: '57014' })],
    ['a lock timeout', errorWith('canceling statement due to lock timeout', { code: '55P03' })],
    ['a read-only database (a standby after a failover: its reads still work)', errorWith('cannot execute INSERT in a read-only transaction', { code: '25006' })],
    ['a domain error', notFound('job x not found')],
    ['a bug', new TypeError("Cannot read properties of undefined (reading 'id')")],
    ['not an error', 'ECONNREFUSED'],
  ])('not %s', (_what, err) => {
    expect(databaseUnavailableReason(err)).toBeNull();
  });
});

describe('DatabaseAvailability: one warn per outage, one info per recovery', () => {
  function tracker() {
    const lines: { level: number; msg: string }[] = [];
    const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as { level: number; msg: string }) });
    /** The lines logged so far as [level, message], durations written `N s`. */
    const logged = () => lines.map((l) => [l.level, l.msg.replace(/[\d.]+ s$/, 'N s')]);
    /** The refusal log's clock (ms), moved by the test. */
    const clock = { now: 1_000 };
    return { availability: new DatabaseAvailability(logger, () => clock.now), lines, logged, clock };
  }
  const refused = () => errorWith('connect ECONNREFUSED 127.0.0.1:5432', { code: 'ECONNREFUSED', address: '127.0.0.1', port: 5432 });

  it('answers an outage with an UNAVAILABLE domain error carrying one line and its cause', () => {
    const { availability } = tracker();
    const cause = refused();
    const err = availability.failure(cause);
    expect(err).toBeInstanceOf(EvoraError);
    expect(isUnavailable(err)).toBe(true);
    expect(err!.message).toBe('database unavailable: connection refused (127.0.0.1:5432)');
    expect(err!.cause).toBe(cause);
    expect(availability.failure(new TypeError('a bug'))).toBeNull();
  });

  it('a statement timeout is answered UNAVAILABLE ("database busy") without starting an outage', () => {
    const { availability, logged } = tracker();
    availability.success();
    const cause = errorWith('canceling statement due to statement timeout', { code: '57014' });
    const err = availability.failure(cause);
    expect(isUnavailable(err)).toBe(true);
    expect(err!.message).toBe('database busy: canceling statement due to statement timeout');
    expect(err!.cause).toBe(cause);
    expect(availability.state).toBe('available');
    expect(logged()).toEqual([[40, 'database busy: canceling statement due to statement timeout']]);
  });

  it('a lock timeout is "database busy" and a read-only database "database read-only": UNAVAILABLE, no outage, reads go on', () => {
    const { availability, logged } = tracker();
    availability.success();
    const lock = availability.failure(errorWith('canceling statement due to lock timeout', { code: '55P03' }));
    expect(isUnavailable(lock)).toBe(true);
    expect(lock!.message).toBe('database busy: canceling statement due to lock timeout');
    const readOnly = availability.failure(errorWith('cannot execute UPDATE in a read-only transaction', { code: '25006' }));
    expect(isUnavailable(readOnly)).toBe(true);
    expect(readOnly!.message).toBe('database read-only: cannot execute UPDATE in a read-only transaction');
    // A read between the refused writes: no "available again", the state never left available.
    availability.success();
    expect(availability.state).toBe('available');
    expect(logged()).toEqual([
      [40, 'database busy: canceling statement due to lock timeout'],
      [40, 'database read-only: cannot execute UPDATE in a read-only transaction'],
    ]);
  });

  // Out of connection slots: new connections refused (the LISTEN connection's reconnects, the
  // pool growing) while the ones already open answer. Out of disk space: writes refused while
  // reads answer. Out of memory: one statement refused while the others run (a real one:
  // test/server/db-connections-full.test.ts). One line, not a warn and an info per refusal.
  it.each([
    ['53300', 'sorry, too many clients already', 'database out of connections: sorry, too many clients already'],
    ['53100', 'could not extend file "base/16384/16417": No space left on device', 'database out of disk space: could not extend file "base/16384/16417": No space left on device'],
    ['53200', 'out of shared memory', 'database out of memory: out of shared memory'],
    ['28P01', 'password authentication failed for user "evora_app"', 'database login refused: password authentication failed for user "evora_app"'],
    ['28000', 'role "evora_app" is not permitted to log in', 'database login refused: role "evora_app" is not permitted to log in'],
    ['42501', 'permission denied for table jobs', 'database permission denied: permission denied for table jobs'],
  ])('SQLSTATE %s is a refusal: UNAVAILABLE with one line, no outage, what still works goes on', (code, message, answered) => {
    const { availability, logged } = tracker();
    availability.success();
    for (let i = 0; i < 20; i++) {
      const err = availability.failure(errorWith(message, { code }));
      expect(isUnavailable(err)).toBe(true);
      expect(err!.message).toBe(answered);
      availability.success();
    }
    expect(availability.state).toBe('available');
    expect(logged()).toEqual([[40, answered]]);
  });

  // What a DBA does to a running server's role (its password changed, a REVOKE) was answered
  // INTERNAL and logged at error with a stack, per call; before the database was reached it
  // still ends the start (the refusals above are one more reason to wait there).
  it('a wrong password, a role refused or a right revoked before the database was reached is not a refusal: the start fails on it', () => {
    const { availability } = tracker();
    for (const code of ['28P01', '28000', '42501']) expect(availability.failure(errorWith('refused', { code }))).toBeNull();
    expect(availability.state).toBe('connecting');
  });

  // A server whose pool is too small for its load: 1,500 submits at once on a server with
  // EVORA_DB_POOL_SIZE=1 and a 1 s connect timeout got 198 "database unavailable: timeout
  // exceeded when trying to connect" and a warn and an info line per burst, the database fine.
  it('a wait for a pooled connection that timed out while the database answered others is "database connections busy", no outage; with no answer meanwhile, an outage', () => {
    const { availability, logged } = tracker();
    const poolWait = () => errorWith('timeout exceeded when trying to connect');
    const busy = "database connections busy: no connection of this server's pool came free in time while the database answered others (raise EVORA_DB_POOL_SIZE)";
    availability.success();
    for (let i = 0; i < 5; i++) {
      const started = availability.mark() - 1;
      availability.success(); // the statements holding the connections were answered
      const err = availability.failure(poolWait(), started);
      expect(isUnavailable(err)).toBe(true);
      expect(err!.message).toBe(busy);
    }
    expect(availability.state).toBe('available');
    // No statement answered since the wait began (the connections hang on a database that stopped answering).
    const err = availability.failure(poolWait(), availability.mark() + 1);
    expect(err!.message).toBe('database unavailable: timeout exceeded when trying to connect');
    expect(availability.state).toBe('unavailable');
    expect(logged()).toEqual([[40, busy], [40, 'database unavailable: timeout exceeded when trying to connect']]);
  });

  // A `LOCK evora.jobs` held 40 s in psql: the submits waiting on it were answered
  // "database unavailable: Query read timeout" and an outage of 0.1 s was logged.
  it('a statement with no answer in the query timeout while the database answered others is "database busy", no outage; with no answer meanwhile, an outage', () => {
    const { availability, logged } = tracker();
    const timedOut = () => errorWith('Query read timeout');
    const busy =
      'database busy: a statement got no answer within EVORA_DB_QUERY_TIMEOUT_MS while the database answered others: it waited on a lock another session holds, or ran long (pg_stat_activity shows which)';
    availability.success();
    const started = availability.mark() - 1;
    availability.success(); // another statement answered while this one waited
    const err = availability.failure(timedOut(), started);
    expect(isUnavailable(err)).toBe(true);
    expect(err!.message).toBe(busy);
    expect(availability.state).toBe('available');
    const down = availability.failure(timedOut(), availability.mark() + 1);
    expect(down!.message).toBe('database unavailable: Query read timeout');
    expect(availability.state).toBe('unavailable');
    expect(logged()).toEqual([[40, busy], [40, 'database unavailable: Query read timeout']]);
  });

  it('startup: a refusal is waited for as an outage is (warn once, reached once)', () => {
    const { availability, logged } = tracker();
    for (let i = 0; i < 3; i++) {
      const err = availability.failure(errorWith('sorry, too many clients already', { code: '53300' }));
      expect(err!.message).toBe('database out of connections: sorry, too many clients already');
    }
    expect(availability.state).toBe('waiting');
    availability.success();
    expect(logged()).toEqual([
      [40, 'waiting for the database: sorry, too many clients already'],
      [30, 'database reached after N s'],
    ]);
  });

  it('refusals are warned once per interval per kind, the next line counting those in between', () => {
    const { availability, logged, clock } = tracker();
    availability.success();
    const readOnly = () => errorWith('cannot execute INSERT in a read-only transaction', { code: '25006' });
    for (let i = 0; i < 100; i++) {
      availability.failure(readOnly());
      availability.success(); // the reads in between
      clock.now += 100;
    }
    // 100 refusals over 10 s: one line so far; a statement timeout is a kind of its own.
    availability.failure(errorWith('canceling statement due to statement timeout', { code: '57014' }));
    clock.now += REFUSAL_LOG_INTERVAL_MS;
    availability.failure(readOnly());
    expect(logged()).toEqual([
      [40, 'database read-only: cannot execute INSERT in a read-only transaction'],
      [40, 'database busy: canceling statement due to statement timeout'],
      [40, 'database read-only: cannot execute INSERT in a read-only transaction (and 99 more since the last line)'],
    ]);
    expect(availability.state).toBe('available');
  });

  it('startup: waiting (warn once), reached (info once)', () => {
    const { availability, logged } = tracker();
    expect(availability.state).toBe('connecting');
    availability.failure(refused());
    availability.failure(refused());
    expect(availability.state).toBe('waiting');
    availability.success();
    expect(availability.state).toBe('available');
    expect(logged()).toEqual([
      [40, 'waiting for the database: connection refused (127.0.0.1:5432)'],
      [30, 'database reached after N s'],
    ]);
  });

  it('an outage is logged once however many statements fail, and its end once', () => {
    const { availability, logged } = tracker();
    availability.success();
    for (let i = 0; i < 100; i++) availability.failure(refused());
    expect(availability.state).toBe('unavailable');
    availability.success();
    availability.success();
    expect(logged()).toEqual([
      [40, 'database unavailable: connection refused (127.0.0.1:5432)'],
      [30, 'database available again after N s'],
    ]);
  });

  it('stragglers do not flap it: a success begun before the outage does not end it, a failure begun before the recovery does not start another', () => {
    const { availability, lines } = tracker();
    availability.success();
    const before = availability.mark();
    availability.failure(refused()); // the outage begins after `before`
    availability.success(before);
    expect(availability.state).toBe('unavailable');
    availability.success(); // a statement begun during the outage
    expect(availability.state).toBe('available');
    const err = availability.failure(refused(), before); // began before the recovery
    expect(isUnavailable(err)).toBe(true);
    expect(availability.state).toBe('available');
    expect(lines.filter((l) => l.level === 40)).toHaveLength(1);
  });
});
