/**
 * The one job every Evora example speaks: type `resize` on the queue `images`. The
 * TypeScript producer submits it; the TypeScript, Go (examples/go-worker/resize.go) and
 * Python (examples/python-worker/resize.py) workers each run it and compute the same result,
 * so any producer feeds any worker. Keep the three in step: the contract is written out in
 * each (and checked by test/interop/workers.test.ts, which runs this producer's jobs on
 * the Go and Python workers and compares their results with `resize` below).
 *
 * Payload:
 *   image               string, required (e.g. "cat.png")
 *   width, height       positive whole numbers, required
 *   max_side            positive whole number, default 256
 *   sleep_ms            pretend the work takes this long (cancellable), default 0
 *   fail_until_attempt  fail (retryable) every attempt numbered below this, default 0
 *   fail                "retryable": fail every attempt; "permanent": fail without retry
 *
 * Result: {image, thumbnail, width, height, attempt, worker}: the thumbnail's size keeps
 * the aspect ratio with its longer side at most max_side (integer arithmetic, rounded half
 * up, so all three workers agree to the pixel).
 */
import type { JsonObject } from '../../src/sdk/index.js';

/** The queue the examples share (the Go and Python workers' default `--queue`). */
export const QUEUE = 'images';
/** The job type every example worker registers. */
export const JOB_TYPE = 'resize';

/** What a `resize` job carries (snake_case, as the Go and Python workers read it). */
export interface ResizePayload {
  image: string;
  width: number;
  height: number;
  max_side?: number;
  sleep_ms?: number;
  fail_until_attempt?: number;
  fail?: 'retryable' | 'permanent';
}

/** What a `resize` job returns. */
export interface ResizeResult {
  image: string;
  thumbnail: string;
  width: number;
  height: number;
  attempt: number;
  worker: string;
}

/** A failed attempt; `retryable: false` sends the job straight to the dead-letter queue. */
export class ResizeError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
    this.name = 'ResizeError';
  }
}

/**
 * The producer's demo batch: `count` ordinary images, one that fails its first attempt (and
 * is retried), and one with a bad payload (no width: straight to the DLQ).
 */
export function demoPayloads(count: number): JsonObject[] {
  const sizes = [[4000, 3000], [1080, 1920], [640, 480], [64, 32], [3000, 3000]] as const;
  const jobs: JsonObject[] = Array.from({ length: count }, (_, i) => {
    const [width, height] = sizes[i % sizes.length]!;
    return { image: `photo${i}.jpg`, width, height, ...(i % 2 === 1 ? { max_side: 640 } : {}) } satisfies ResizePayload;
  });
  jobs.push({ image: 'flaky.png', width: 800, height: 600, fail_until_attempt: 2 } satisfies ResizePayload);
  jobs.push({ image: 'broken.png', height: 600 }); // no width: not a ResizePayload on purpose
  return jobs;
}

/** A JSON number without a fractional part, or null. */
function whole(v: unknown): number | null {
  return typeof v === 'number' && Number.isInteger(v) ? v : null;
}

/**
 * Runs one attempt of a `resize` job (the work itself is arithmetic; `sleep_ms` is waited
 * by the caller). Throws ResizeError for a failed attempt, exactly where the Go and Python
 * workers fail it.
 */
export function resize(payload: JsonObject, attempt: number, worker: string): ResizeResult {
  const p = payload;
  const fail = p.fail ?? '';
  if (fail === 'retryable') throw new ResizeError(`asked to fail (attempt ${attempt})`, true);
  if (fail === 'permanent') throw new ResizeError('asked to fail permanently', false);
  if (fail !== '') throw new ResizeError('bad payload: fail must be "retryable" or "permanent"', false);
  const n = whole(p.fail_until_attempt);
  if (n !== null && attempt < n) throw new ResizeError(`simulated failure on attempt ${attempt} (fail_until_attempt=${n})`, true);

  const image = p.image;
  if (typeof image !== 'string' || image === '') throw new ResizeError('bad payload: image must be a non-empty string', false);
  const w = whole(p.width);
  const h = whole(p.height);
  if (w === null || h === null || w <= 0 || h <= 0) throw new ResizeError('bad payload: width and height must be positive whole numbers', false);
  let maxSide = 256;
  if ('max_side' in p) {
    const m = whole(p.max_side);
    if (m === null || m <= 0) throw new ResizeError('bad payload: max_side must be a positive whole number', false);
    maxSide = m;
  }

  let [tw, th] = [w, h];
  const long = Math.max(w, h);
  if (long > maxSide) {
    // round(x * maxSide / long), half up, in integers
    tw = Math.floor((2 * w * maxSide + long) / (2 * long));
    th = Math.floor((2 * h * maxSide + long) / (2 * long));
  }
  // As Python's os.path.splitext (and Go's path.Ext, but for names that start with a dot):
  // the extension starts at the last dot of the name.
  const dot = image.lastIndexOf('.');
  const slash = image.lastIndexOf('/');
  const [stem, ext] = dot > slash + 1 ? [image.slice(0, dot), image.slice(dot)] : [image, ''];
  return { image, thumbnail: `${stem}_${tw}x${th}${ext}`, width: tw, height: th, attempt, worker };
}
