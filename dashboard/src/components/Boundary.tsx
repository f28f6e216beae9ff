/**
 * Catches what fails while a part of a page is drawn, above all a chunk loaded on demand
 * (the dependency graph's) that cannot be had: the server was down at that moment, or it was
 * upgraded and the old build's files are gone. Without it React unmounts the whole app and
 * the tab goes blank, header and all, until a reload; with it that part says so in one line
 * and the rest of the page stays.
 */
import { Component, type ReactNode } from 'react';
import { errorLine } from '../api';

export class Boundary extends Component<{ what: string; children: ReactNode }, { error: unknown }> {
  override state: { error: unknown } = { error: null };

  static getDerivedStateFromError(error: unknown): { error: unknown } {
    return { error: error ?? new Error('unknown error') };
  }

  override render(): ReactNode {
    if (!this.state.error) return this.props.children;
    const text = `${this.props.what} could not be shown (${errorLine(this.state.error)}): reload the page to try again; the server may have restarted or been upgraded meanwhile.`;
    return (
      <p className="error-line" role="alert" data-testid="boundary-error" title={text}>
        {text}
      </p>
    );
  }
}
