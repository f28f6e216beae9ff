/**
 * The TypeScript snippets of docs/sdk.md type-check against the SDK, as a reader who copies
 * them into a file of their own would compile them: each ```ts block is a module of its own
 * after the guide's first block (its import line). A snippet that no longer compiles (a
 * renamed option, a name declared twice) fails here, not in a user's editor. `evora/client`
 * is the built package's declarations (dist/, as `npm install` builds and CI has): checking
 * against the SDK's sources would compile all of src/gen, several times slower.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** What `evora/client` resolves to in a project that installed the package. */
const SDK_TYPES = 'dist/src/sdk/index.d.ts';

/**
 * What the snippets use without defining: the guide's own placeholders for the reader's
 * code (a send function, a list of jobs) and the fs import the token example reads with.
 */
const PRELUDE = `import { readFileSync } from 'node:fs';
declare function send(payload: unknown, opts: { signal: AbortSignal }): Promise<void>;
declare const manyJobs: Parameters<EvoraClient['submitMany']>[0];
export {};
`;

/** The ```ts blocks of a Markdown file, in order, each with the line its code starts on. */
function tsBlocks(markdown: string): { code: string; line: number }[] {
  return [...markdown.matchAll(/^```ts\n([\s\S]*?)^```/gm)].map((m) => ({
    code: m[1] ?? '',
    line: markdown.slice(0, m.index).split('\n').length + 1,
  }));
}

/**
 * Type-checks `files` (path -> text, never written) with `evora/client` mapped to the SDK;
 * each error is named by `where(file, line)`.
 */
function typeErrors(files: Map<string, string>, where: (file: string, line: number) => string): string[] {
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: ['node'],
    baseUrl: ROOT,
    paths: { 'evora/client': [SDK_TYPES], evora: [SDK_TYPES] },
  };
  const host = ts.createCompilerHost(options);
  const { fileExists, readFile, getSourceFile } = host;
  host.fileExists = (f) => files.has(f) || fileExists.call(host, f);
  host.readFile = (f) => files.get(f) ?? readFile.call(host, f);
  host.getSourceFile = (f, lang, ...rest) => {
    const text = files.get(f);
    return text === undefined ? getSourceFile.call(host, f, lang, ...rest) : ts.createSourceFile(f, text, lang);
  };
  const program = ts.createProgram([...files.keys()], options, host);
  return ts
    .getPreEmitDiagnostics(program)
    .filter((d) => d.file && files.has(d.file.fileName))
    .map((d) => {
      const { line } = d.file!.getLineAndCharacterOfPosition(d.start ?? 0);
      return `${where(d.file!.fileName, line + 1)}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
    });
}

describe('docs/sdk.md snippets', () => {
  it('type-check against the SDK', () => {
    expect(existsSync(join(ROOT, SDK_TYPES)), `${SDK_TYPES} is missing: run npm run build first`).toBe(true);
    const [imports, ...blocks] = tsBlocks(readFileSync(join(ROOT, 'docs/sdk.md'), 'utf8'));
    expect(imports?.code).toContain("from 'evora/client'");
    expect(blocks.length).toBeGreaterThanOrEqual(3);
    const header = `${imports?.code}${PRELUDE}`;
    const headerLines = header.split('\n').length - 1;
    const files = new Map(blocks.map((b, i) => [join(ROOT, `test/sdk/sdk-md-snippet-${i}.ts`), `${header}${b.code}`]));
    const docLine = (file: string, line: number) => {
      const block = blocks[Number(/snippet-(\d+)/.exec(file)?.[1])];
      return `docs/sdk.md:${(block?.line ?? 0) + line - 1 - headerLines}`;
    };
    expect(typeErrors(files, docLine)).toEqual([]);
  }, 60_000);
});
