/**
 * The first key that appears twice in one object of JSON text, decoded ("queue"); null when
 * every object's keys are distinct. JSON.parse keeps the last of two, so
 * `{"queue": "a", …, "queue": "b"}` submitted to queue b, silently, while a proxy or a log
 * that read the first saw queue a; protobuf's own JSON parsers (Go's protojson, which grpcurl
 * uses) refuse it, as @bufbuild/protobuf refuses one field under both its names. `text` must
 * be valid JSON (parsed already): the scan only follows strings, objects and arrays.
 */
export function jsonDuplicateKey(text: string): string | null {
  // One entry per open object or array: the keys seen so far (null for an array).
  const stack: (Set<string> | null)[] = [];
  // Whether the next string in the innermost object is a key.
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      let end = i + 1;
      let escaped = false;
      while (text.charCodeAt(end) !== 0x22) {
        if (text.charCodeAt(end) === 0x5c /* \ */) {
          escaped = true;
          end += 2;
        } else end += 1;
      }
      const top = stack[stack.length - 1];
      if (expectKey && top) {
        const raw = text.slice(i + 1, end);
        const key = escaped ? (JSON.parse(`"${raw}"`) as string) : raw;
        if (top.has(key)) return key;
        top.add(key);
        expectKey = false;
      }
      i = end;
    } else if (c === 0x7b /* { */) {
      stack.push(new Set());
      expectKey = true;
    } else if (c === 0x5b /* [ */) {
      stack.push(null);
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
    } else if (c === 0x2c /* , */) {
      expectKey = stack[stack.length - 1] !== null;
    }
  }
  return null;
}
