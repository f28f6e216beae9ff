import pg from 'pg';

/**
 * How the store's connections turn column values into JavaScript. The sessions run in UTC
 * with ISO dates (the pool's clients send TimeZone and DateStyle when they connect: connections.ts), so PostgreSQL sends every timestamptz as
 * `YYYY-MM-DD HH:MM:SS[.ffffff]+00`; that shape is read by slicing instead of the general
 * regular-expression parser, which was a few percent of the server's CPU on the hot path.
 * Anything else (infinity, BC dates, other offsets) goes to pg's own parser. Dates keep
 * millisecond precision, as before.
 */
export const storeTypes = {
  getTypeParser(oid: number, format?: string): unknown {
    if (oid === TIMESTAMPTZ_OID && (format === undefined || format === 'text')) return timestamptzParse;
    return format === 'binary' ? pg.types.getTypeParser(oid, 'binary') : pg.types.getTypeParser(oid);
  },
} as unknown as pg.CustomTypesConfig;

const TIMESTAMPTZ_OID = 1184;
const defaultTimestamptz = pg.types.getTypeParser(TIMESTAMPTZ_OID) as (value: string) => Date;

/**
 * Recently parsed values. A claim's rows repeat a few timestamps (one `now()` per statement:
 * started_at, locked_until, and created_at/run_at of jobs submitted together), so most
 * values are parsed once per statement. Dates from the store are shared: never mutate one.
 */
const recent = new Map<string, Date>();
const RECENT_MAX = 256;

/** Parses a timestamptz in PostgreSQL's UTC text form; other forms go to pg's parser. */
export function timestamptzParse(value: string): Date {
  const hit = recent.get(value);
  if (hit) return hit;
  const date = timestamptzParseText(value);
  if (recent.size >= RECENT_MAX) recent.clear();
  recent.set(value, date);
  return date;
}

function timestamptzParseText(value: string): Date {
  const n = value.length;
  // 'YYYY-MM-DD HH:MM:SS+00' (22 chars) or with '.f' to '.ffffff' before the offset.
  if (n >= 22 && n <= 29 && value.charCodeAt(4) === 45 && value.charCodeAt(0) !== 48 && value.endsWith('+00') && value.charCodeAt(10) === 32) {
    const fraction = n > 22 ? Number(`0${value.slice(19, n - 3)}`) : 0;
    const ms = Date.UTC(
      Number(value.slice(0, 4)),
      Number(value.slice(5, 7)) - 1,
      Number(value.slice(8, 10)),
      Number(value.slice(11, 13)),
      Number(value.slice(14, 16)),
      Number(value.slice(17, 19)),
    );
    if (!Number.isNaN(ms) && !Number.isNaN(fraction)) return new Date(ms + Math.floor(fraction * 1000));
  }
  return defaultTimestamptz(value);
}

const UUID_ARRAY_OID = 2951;

/** A uuid[] in PostgreSQL's text form (what a raw statement returns) as strings: pg's own parser. */
export const uuidArrayParse = pg.types.getTypeParser(UUID_ARRAY_OID as Parameters<typeof pg.types.getTypeParser>[0]) as (value: string) => string[];
