import { randomBytes } from 'node:crypto';

/** 1 for the ASCII codes of hex digits (either case). */
const HEX = new Uint8Array(128);
for (const c of '0123456789abcdefABCDEF') HEX[c.charCodeAt(0)] = 1;

/**
 * True when `s` is a UUID in its canonical text form (what Postgres' uuid type accepts):
 * 8-4-4-4-12 hex digits, either case. Every report of every job is checked (its id and
 * token, by the Work stream and again by the store), so this is a loop over a table rather
 * than the regular expression it means (/^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$/i),
 * which costs about half as much again.
 */
export function isUuid(s: string): boolean {
  if (s.length !== 36) return false;
  for (let i = 0; i < 36; i++) {
    const c = s.charCodeAt(i);
    if (i === 8 || i === 13 || i === 18 || i === 23) {
      if (c !== 45) return false; // '-'
    } else if (c > 127 || HEX[c] === 0) {
      return false;
    }
  }
  return true;
}

let lastMs = 0;
let sequence = 0;

/**
 * A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then a 12-bit sequence that keeps ids
 * made in the same millisecond by this process increasing, then random bits. Job ids are
 * made here rather than in Postgres so a batch submit knows each job's id before the
 * insert (an idempotent replay is then recognised by the id it does not get back), and
 * their time order keeps the primary key's inserts at the index's right edge.
 */
export function uuidv7(nowMs = Date.now()): string {
  if (nowMs > lastMs) {
    lastMs = nowMs;
    sequence = randomBytes(2).readUInt16BE(0) & 0x3ff; // leave room to count up within the ms
  } else {
    sequence++;
    if (sequence > 0xfff) {
      lastMs++; // borrow the next millisecond rather than repeat a value
      sequence = 0;
    }
  }
  const bytes = randomBytes(16);
  const ms = lastMs;
  bytes[0] = Math.floor(ms / 2 ** 40) & 0xff;
  bytes[1] = Math.floor(ms / 2 ** 32) & 0xff;
  bytes[2] = (ms >>> 24) & 0xff;
  bytes[3] = (ms >>> 16) & 0xff;
  bytes[4] = (ms >>> 8) & 0xff;
  bytes[5] = ms & 0xff;
  bytes[6] = 0x70 | ((sequence >>> 8) & 0x0f);
  bytes[7] = sequence & 0xff;
  bytes[8] = 0x80 | ((bytes[8] ?? 0) & 0x3f);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
