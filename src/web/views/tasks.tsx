/** Tasks (LMSP 7): a live list, filtered by status, newest first. */
import { useState } from 'preact/hooks';
import { formatDuration } from '../format.js';
import { href } from '../router.js';
import { hasScope, request } from '../session.js';
import { Ago, Code, ErrorNotice, PageControls, PageHeading, StatusBadge, TableRegion, useApp, usePages, usePoll } from '../ui.js';
import type { Client, List, Task } from '../wire.js';

export const REFRESH_MS = 1500;
/** Tasks a page of a list shows; older ones are a page further (the API's `after` cursor). */
export const PAGE_SIZE = 50;

const FILTERS = [
  { value: 'all', label: 'All', statuses: null },
  { value: 'unfinished', label: 'Unfinished', statuses: 'queued,loading,running,cancelling' },
  { value: 'completed', label: 'Completed', statuses: 'completed' },
  { value: 'failed', label: 'Failed', statuses: 'failed' },
  { value: 'cancelled', label: 'Cancelled', statuses: 'cancelled,cancelling' },
] as const;

type Filter = (typeof FILTERS)[number]['value'];

export function taskDuration(task: Task, now = Date.now() / 1000): number | null {
  if (task.started_at === null) return null;
  return (task.finished_at ?? now) - task.started_at;
}

/**
 * A task's run time as its timestamps know it: whole seconds (LMSP 2), so a run that started and
 * ended within one second is 'under 1 s', never a precise-looking '0 ms'.
 */
export function formatRunTime(task: Task, now = Date.now() / 1000): string {
  const seconds = taskDuration(task, now);
  if (seconds === null) return '-';
  const whole = Math.floor(seconds);
  if (whole < 1) return 'under 1 s';
  return whole < 60 ? `${whole} s` : formatDuration(whole);
}

/** The Client column, for admins: the client's name where the list of clients has it, else its id. */
function ClientCell({ id, names }: { id: string; names: ReadonlyMap<string, string> }) {
  const name = names.get(id);
  // A client's name is the operator's free text: it wraps within the column rather than widening the table.
  return <td class="name">{name === undefined ? <Code>{id}</Code> : <span title={id}>{name}</span>}</td>;
}

export function TaskTable({ tasks, caption, clientNames }: { tasks: Task[]; caption: string; clientNames: ReadonlyMap<string, string> | null }) {
  return (
    <TableRegion label={caption}>
      <table>
        <caption>{caption}</caption>
        <thead>
          <tr>
            {/* Status second: on a narrow screen it stays in sight without scrolling the table. */}
            <th scope="col">Task</th>
            <th scope="col">Status</th>
            <th scope="col">Kind</th>
            <th scope="col">Model</th>
            <th scope="col">Created</th>
            <th scope="col">Run time</th>
            {clientNames && <th scope="col">Client</th>}
          </tr>
        </thead>
        <tbody>
          {tasks.map((task) => (
            <tr key={task.id}>
              <td><a href={href('tasks', task.id)}><Code>{task.id}</Code></a></td>
              <td><StatusBadge status={task.status} />{task.error && <span class="error-code"> {task.error.code}</span>}</td>
              <td>{task.kind}</td>
              <td><span class="model-id">{task.model}</span></td>
              <td><Ago seconds={task.created_at} /></td>
              <td>{formatRunTime(task)}</td>
              {clientNames && <ClientCell id={task.client_id} names={clientNames} />}
            </tr>
          ))}
        </tbody>
      </table>
    </TableRegion>
  );
}

export function TasksView() {
  const { session } = useApp();
  const [filter, setFilter] = useState<Filter>('all');
  const statuses = FILTERS.find((candidate) => candidate.value === filter)!.statuses;
  const pages = usePages();
  const tasks = usePoll(
    () => request<List<Task>>(session, 'GET', `v1/tasks?limit=${PAGE_SIZE}${statuses ? `&status=${statuses}` : ''}${pages.after ? `&after=${encodeURIComponent(pages.after)}` : ''}`),
    REFRESH_MS, [filter, pages.after]);
  const admin = hasScope(session, 'admin');
  // Admins see every client's tasks: the Client column names them (the ids alone are 36 characters).
  const clients = usePoll(() => (admin ? request<List<Client>>(session, 'GET', 'v1/clients?limit=1000') : Promise.resolve(null)), admin ? 10_000 : null, [admin]);
  const clientNames = admin ? new Map((clients.data?.data ?? []).map((client) => [client.id, client.name])) : null;

  return (
    <>
      <PageHeading>Tasks</PageHeading>
      <p class="lead">Every response, chat completion and model pull is a durable task. The list refreshes by itself; open a task to follow its output and its event log live.</p>
      <fieldset class="filters">
        <legend>Show</legend>
        {FILTERS.map((option) => (
          <label key={option.value} class="filter">
            <input type="radio" name="status-filter" value={option.value} checked={filter === option.value}
              onChange={() => {
                setFilter(option.value);
                pages.reset();
              }} />
            {option.label}
          </label>
        ))}
      </fieldset>
      <ErrorNotice error={tasks.error} />
      {tasks.data && tasks.data.data.length === 0 && <p class="empty">No {filter === 'all' ? '' : `${filter} `}tasks{admin ? '' : ' of yours'}.</p>}
      {tasks.data && tasks.data.data.length > 0 && (
        <TaskTable tasks={tasks.data.data} clientNames={clientNames}
          caption={`${filter === 'all' ? 'Latest' : FILTERS.find((f) => f.value === filter)!.label} tasks${pages.index > 0 ? `, page ${pages.index + 1}` : tasks.data.has_more ? ` (the ${PAGE_SIZE} newest)` : ''}`} />
      )}
      {tasks.data && <PageControls pages={pages} hasMore={tasks.data.has_more} lastId={tasks.data.data.at(-1)?.id ?? null} label="tasks" />}
    </>
  );
}
