import { BinaryReader } from '@bufbuild/protobuf/wire';

/**
 * The protobuf reader the hot messages are decoded with (the Work stream both ways, and
 * SubmitJob(s) on the server): @bufbuild/protobuf's BinaryReader, with the two reads that
 * allocate most done the cheap way a Node Buffer allows. The generated decoders take any
 * BinaryReader and pass it on to nested messages, so `X.decode(new NodeBufferReader(bytes))`
 * decodes exactly as `X.decode(bytes)` does, with less garbage:
 *
 * - `string()`: Buffer#toString('utf8'), one native call, where the base class builds an array of
 *   char codes (32 bytes and shorter) or a subarray view and a TextDecoder call (longer:
 *   every job id and lease token is 36). Invalid UTF-8 becomes U+FFFD either way.
 * - `int64()`: a varint of up to 7 bytes (a non-negative value below 2^49, such as a
 *   Timestamp's seconds) as a number, where the base class makes a BigInt. The generated code
 *   reads every int64 through `longToNumber(x)` (ts-proto, forceLong=number), which takes
 *   the number as it takes a BigInt (test/wire/node-buffer-reader.test.ts pins both).
 *
 * What must stay true: every value decodes to what BinaryReader gives; no other method is
 * changed. Why by hand: no protobuf runtime for Node offers a Buffer-native reader, and these
 * two reads were a fifth of what a worker allocated per job.
 */
export class NodeBufferReader extends BinaryReader {
  readonly #bytes: Buffer;

  constructor(bytes: Buffer) {
    super(bytes);
    this.#bytes = bytes;
  }

  override string(): string {
    const len = this.uint32();
    const start = this.pos;
    this.pos += len;
    if (this.pos > this.len) throw new RangeError('premature EOF');
    return this.#bytes.toString('utf8', start, this.pos);
  }

  override int64(): bigint | string {
    const buf = this.#bytes;
    let pos = this.pos;
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 7 && pos < this.len; i++) {
      const byte = buf[pos++] as number;
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) {
        this.pos = pos;
        // A number where the base class returns a bigint: see the class comment.
        return value as unknown as bigint;
      }
      scale *= 128;
    }
    return super.int64();
  }
}

/** `decode` run on a NodeBufferReader: a gRPC deserializer for the message `decode` reads. */
export function bufferDecoder<T>(decode: (reader: BinaryReader) => T): (bytes: Buffer) => T {
  return (bytes) => decode(new NodeBufferReader(bytes));
}
