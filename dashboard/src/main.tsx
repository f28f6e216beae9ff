/**
 * The dashboard's entry: one QueryClient (live views poll every 2 s through their own
 * refetchInterval and are not retried, queries.ts LIVE; other reads are retried twice, but
 * never after a 4xx), browser-history routes (the server answers every
 * non-/v1 GET with index.html), and the pages.
 */
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { BrowserRouter, Route, Routes } from 'react-router';
import { ApiError } from './api';
import { Layout } from './components/Layout';
import { DeadLetters } from './pages/DeadLetters';
import { JobPage } from './pages/JobPage';
import { Jobs } from './pages/Jobs';
import { NotFound } from './pages/NotFound';
import { Overview } from './pages/Overview';
import { QueuePage } from './pages/QueuePage';
import { Queues } from './pages/Queues';
import { Schedules } from './pages/Schedules';
import { Workers } from './pages/Workers';
import './styles.css';

const queryClient = new QueryClient({
  defaultOptions: {
    queries: {
      retry: (failures, error) => !(error instanceof ApiError && error.status >= 400 && error.status < 500) && failures < 2,
      refetchOnWindowFocus: true,
    },
  },
});

const root = document.getElementById('root');
if (!root) throw new Error('index.html has no #root');
createRoot(root).render(
  <StrictMode>
    <QueryClientProvider client={queryClient}>
      <BrowserRouter>
        <Routes>
          <Route element={<Layout />}>
            <Route index element={<Overview />} />
            <Route path="queues" element={<Queues />} />
            <Route path="queues/:name" element={<QueuePage />} />
            <Route path="jobs" element={<Jobs />} />
            <Route path="jobs/:id" element={<JobPage />} />
            <Route path="dead-letters" element={<DeadLetters />} />
            <Route path="workers" element={<Workers />} />
            <Route path="schedules" element={<Schedules />} />
            <Route path="*" element={<NotFound />} />
          </Route>
        </Routes>
      </BrowserRouter>
    </QueryClientProvider>
  </StrictMode>,
);
