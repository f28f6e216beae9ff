/**
 * The page frame: the header with the caller, the navigation (NavLink sets aria-current on
 * the page shown), and either the page or, after a 401, the token form.
 */
import { NavLink, Outlet, useLocation } from 'react-router';
import { CallerBadge, TokenForm, useAuthRequired, useCaller } from '../auth';
import { Boundary } from './Boundary';
import { ErrorLine, UnreachableBanner } from './status';

const PAGES = [
  { to: '/', label: 'Overview', testId: 'nav-overview' },
  { to: '/queues', label: 'Queues', testId: 'nav-queues' },
  { to: '/jobs', label: 'Jobs', testId: 'nav-jobs' },
  { to: '/dead-letters', label: 'Dead letters', testId: 'nav-dead-letters' },
  { to: '/workers', label: 'Workers', testId: 'nav-workers' },
  { to: '/schedules', label: 'Schedules', testId: 'nav-schedules' },
] as const;

export function Layout() {
  const authRequired = useAuthRequired();
  const caller = useCaller();
  const location = useLocation();
  return (
    <>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="top">
        <span className="brand">Evora</span>
        <nav aria-label="Main">
          <ul>
            {PAGES.map((page) => (
              <li key={page.to}>
                <NavLink to={page.to} end={page.to === '/'} data-testid={page.testId}>
                  {page.label}
                </NavLink>
              </li>
            ))}
          </ul>
        </nav>
        <CallerBadge />
      </header>
      <main id="main" tabIndex={-1}>
        <UnreachableBanner />
        {authRequired ? (
          <TokenForm />
        ) : (
          <>
            {caller.error ? <ErrorLine error={caller.error} testId="caller-error" /> : null}
            {/* Keyed by the route, so leaving a page that failed to draw starts the next one afresh. */}
            <Boundary key={location.pathname} what="This page">
              <Outlet />
            </Boundary>
          </>
        )}
      </main>
    </>
  );
}
