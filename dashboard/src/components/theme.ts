/** The light/dark setting of the system (prefers-color-scheme), as a React value. */
import { useSyncExternalStore } from 'react';

const query = window.matchMedia('(prefers-color-scheme: dark)');

/** 'dark' or 'light', re-rendering when the system setting changes. */
export function useTheme(): 'dark' | 'light' {
  return useSyncExternalStore(
    (listener) => {
      query.addEventListener('change', listener);
      return () => query.removeEventListener('change', listener);
    },
    () => (query.matches ? 'dark' : 'light'),
  );
}

/** A CSS variable's value on the root element (the theme's colours live in styles.css). */
export function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}
