/** A full id (never shortened) with a copy button that says "copied" for a moment. */
import { useEffect, useState } from 'react';
import { Link } from 'react-router';

export function CopyId({ id, to, testId }: { id: string; to?: string; testId?: string }) {
  const [state, setState] = useState<'idle' | 'copied' | 'failed'>('idle');
  useEffect(() => {
    if (state === 'idle') return;
    const timer = setTimeout(() => setState('idle'), 1500);
    return () => clearTimeout(timer);
  }, [state]);
  async function copy() {
    try {
      await navigator.clipboard.writeText(id);
      setState('copied');
    } catch {
      setState('failed');
    }
  }
  return (
    <span className="copy-id">
      {to ? (
        <Link to={to} className="mono" data-testid={testId}>
          {id}
        </Link>
      ) : (
        <code data-testid={testId}>{id}</code>
      )}
      <button
        type="button"
        className="copy"
        onClick={() => void copy()}
        aria-label={`Copy ${id}`}
        data-testid="copy-id"
        data-state={state}
      >
        {state === 'copied' ? 'copied' : state === 'failed' ? 'copy failed' : 'copy'}
      </button>
    </span>
  );
}
