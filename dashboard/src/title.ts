/** The browser tab's title for each view. */
import { useEffect } from 'react';

/**
 * Names the tab `<what> · Evora` while the view shows, so that an operator's open tabs (a
 * queue, a job, the dead letters) can be told apart and found in the history; every view
 * calls it, so a view never keeps the title of the one before.
 */
export function usePageTitle(what: string): void {
  useEffect(() => {
    document.title = `${what} · Evora`;
  }, [what]);
}
