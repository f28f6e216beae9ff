import type { EventEmitter } from 'node:events';

/** An open long-lived stream (Work, SubmitJobStream) as shutdown sees it. */
export interface ServerStreamHandle {
  /**
   * Ends the stream gracefully: it reads no more requests, answers those it read (a Work
   * stream: no new jobs, the acks of reports received), then ends with OK. Safe to call twice.
   */
  end(): void;
}

/**
 * The long-lived streams (Work, SubmitJobStream) open on this server, so that shutdown can
 * end them. Once `endAll()` has run, a stream that opens later (its call was accepted just
 * before the gRPC port stopped taking calls) is ended as soon as it is added, so every
 * stream ends gracefully and none waits for the grace second of the port's close to be
 * cancelled.
 */
export class OpenStreams {
  private readonly open = new Set<ServerStreamHandle>();
  private ending = false;

  /** Registers an opened stream; ends it at once when shutdown already ended the others. */
  add(stream: ServerStreamHandle): void {
    this.open.add(stream);
    if (this.ending) stream.end();
  }

  /** Forgets a stream that has closed. */
  delete(stream: ServerStreamHandle): void {
    this.open.delete(stream);
  }

  /** Streams open now. */
  get size(): number {
    return this.open.size;
  }

  /** Ends every open stream gracefully, and every stream added from now on. */
  endAll(): void {
    this.ending = true;
    for (const stream of [...this.open]) stream.end();
  }
}

/**
 * Calls `gone` however a stream's call ends other than gracefully: an error, a close or a
 * cancellation. More than one may come for one call, so `gone` must be safe to call twice.
 */
export function onCallGone(call: EventEmitter, gone: () => void): void {
  call.on('error', gone);
  call.on('close', gone);
  call.on('cancelled', gone);
}
