/** Any client route the dashboard does not know. */
import { Link } from 'react-router';
import { usePageTitle } from '../title';

export function NotFound() {
  usePageTitle('Not found');
  return (
    <section>
      <h1>Not found</h1>
      <p>
        No such page. <Link to="/">Back to the overview</Link>.
      </p>
    </section>
  );
}
