/**
 * One task, live (LMSP 7.3): its status, the text as it is generated, its event log, and cancel.
 * The page follows the task's event stream; what it shows is rebuilt from the events alone, the
 * way any client rebuilds a response from its stream.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { formatBytes, formatTime } from '../format.js';
import { href } from '../router.js';
import { ApiError, request } from '../session.js';
import { followTaskEvents, type FollowMode } from '../stream.js';
import { Code, ErrorNotice, Notice, PageHeading, ScrollText, StatusBadge, useApp, usePoll } from '../ui.js';
import { isUnfinished, outputText, type Client, type List, type Response, type Task, type TaskEvent } from '../wire.js';
import { ResponseDetails } from './response-details.js';
import { formatRunTime } from './tasks.js';

/** Rows of the event log shown at first, and added by each "Show earlier events". */
const LOG_ROWS = 300;

export interface LiveState {
  text: string;
  events: TaskEvent[];
  eventCount: number;
  pull: { downloaded: number; total: number | null } | null;
  ended: boolean;
  /** How many of the latest events the log keeps (LOG_ROWS unless earlier ones were asked for). */
  limit?: number;
}

export const EMPTY_LIVE: LiveState = { text: '', events: [], eventCount: 0, pull: null, ended: false };

/** What the event log says while its task runs, by how the page follows it. */
const FOLLOWING: Record<FollowMode, string> = {
  connecting: 'Connecting to the service.',
  live: 'Following live.',
  polled: 'Following: new events are read every second, as other tabs of the dashboard hold the live streams the browser allows.',
};

/** Events from before the oldest one kept, put in front of the log, which keeps them from then on. */
export function withEarlier(state: LiveState, earlier: TaskEvent[]): LiveState {
  const first = state.events[0]?.sequence_number ?? Infinity;
  const before = earlier.filter((event) => event.sequence_number < first);
  return { ...state, events: [...before, ...state.events], limit: (state.limit ?? LOG_ROWS) + before.length };
}

/** What a batch of events changes in the view (text, log, pull progress). */
export function applyEvents(state: LiveState, events: TaskEvent[]): LiveState {
  let { text, pull, ended } = state;
  for (const event of events) {
    const response = event.response as Response | undefined;
    if (response && Array.isArray(response.output)) {
      // Events that carry the response carry its text so far: a retry starts it again.
      text = outputText(response.output);
    } else if (event.type === 'response.output_text.delta' && typeof event.delta === 'string') {
      text += event.delta;
    } else if (event.type === 'chat.completion.chunk') {
      // LMSP 13: the chunk as streamed, under `chunk` or at the top level of the event.
      const chunk = (event.chunk ?? event) as { choices?: Array<{ delta?: { content?: string | null } }> };
      text += chunk.choices?.[0]?.delta?.content ?? '';
    } else if (event.type === 'chat.completion.completed') {
      const completion = (event.completion ?? event) as { choices?: Array<{ message?: { content?: string | null } }> };
      text = completion.choices?.[0]?.message?.content ?? text;
    } else if (event.type === 'model.pull.progress' || event.type === 'model.pull.resumed') {
      const downloaded = Number(event.downloaded_bytes ?? 0);
      const total = event.total_bytes === null || event.total_bytes === undefined ? null : Number(event.total_bytes);
      pull = { downloaded, total };
    }
    if (/\.(completed|incomplete|failed|cancelled)$/.test(event.type)) ended = true;
  }
  const log = [...state.events, ...events];
  return { ...state, text, pull, ended, events: log.slice(-(state.limit ?? LOG_ROWS)), eventCount: state.eventCount + events.length };
}

export function PullProgress({ pull }: { pull: LiveState['pull'] }) {
  if (!pull) return null;
  const label = `${formatBytes(pull.downloaded)}${pull.total ? ` of ${formatBytes(pull.total)}` : ''}`;
  return (
    <div class="pull-progress">
      <progress value={pull.downloaded} max={pull.total ?? undefined} aria-label="Download progress" aria-valuetext={label} />
      <span>{label}</span>
    </div>
  );
}

function eventSummary(event: TaskEvent): string {
  if (typeof event.delta === 'string') return JSON.stringify(event.delta);
  if (event.type === 'model.pull.progress') return `${formatBytes(Number(event.downloaded_bytes))} of ${formatBytes(Number(event.total_bytes))}`;
  const response = event.response as Response | undefined;
  if (response?.error) return `${response.error.code}: ${response.error.message}`;
  if (response) return `response ${response.status}`;
  const error = event.error as { code?: string; message?: string } | undefined;
  if (error) return `${error.code}: ${error.message}`;
  return '';
}

/**
 * The client a task belongs to, by its name where this session can know it (its own, or any for
 * an admin, who can list the clients), with the id beside it.
 */
function ClientName({ id }: { id: string }) {
  const { session } = useApp();
  const own = session.client.id === id;
  const admin = session.client.scopes.includes('admin');
  const clients = usePoll(() => (!own && admin ? request<List<Client>>(session, 'GET', 'v1/clients?limit=1000') : Promise.resolve(null)), null, [own, admin]);
  const name = own ? session.client.name : clients.data?.data.find((client) => client.id === id)?.name;
  return name === undefined ? <Code>{id}</Code> : <>{name} <Code>{id}</Code></>;
}

export function TaskView({ taskId }: { taskId: string }) {
  const { session, announce } = useApp();
  const [task, setTask] = useState<Task | null>(null);
  const [error, setError] = useState<Error | null>(null);
  /**
   * The service refused the event stream for now (LMSP 16), or could not be reached (status 0);
   * the page asks again by itself.
   */
  const [refusal, setRefusal] = useState<ApiError | null>(null);
  const [mode, setMode] = useState<FollowMode>('connecting');
  const [live, setLive] = useState<LiveState>(EMPTY_LIVE);
  const [earlierError, setEarlierError] = useState<string | null>(null);
  /** What became of this page's cancel: accepted (the notice follows the task's status), or refused. */
  const [cancelOutcome, setCancelOutcome] = useState<{ accepted: true } | { accepted: false; message: string } | null>(null);
  const lastStatus = useRef<string | null>(null);
  const log = useRef<HTMLDivElement>(null);
  const logAtEnd = useRef(true);
  /** Where the page itself last scrolled the log to: a scroll event from there on is not a reader's. */
  const followedTo = useRef<number | null>(null);

  // The log follows new events while it is scrolled to its end, and stays put while someone reads back.
  useEffect(() => {
    const element = log.current;
    if (!element) return;
    // A reader who scrolled back since the page last followed, whose scroll event has not come
    // yet (it comes a frame later): where the log is now says so, and the page stays put.
    if (followedTo.current !== null && element.scrollTop < followedTo.current - 1) {
      followedTo.current = null;
      logAtEnd.current = false;
    }
    if (!logAtEnd.current) return;
    element.scrollTop = element.scrollHeight;
    followedTo.current = element.scrollTop;
  }, [live.eventCount]);

  const reload = async () => {
    try {
      const next = await request<Task>(session, 'GET', `v1/tasks/${encodeURIComponent(taskId)}`);
      if (lastStatus.current !== null && lastStatus.current !== next.status) announce(`Task ${next.status}.`);
      lastStatus.current = next.status;
      setTask(next);
      setError(null);
    } catch (failure) {
      setError(failure as Error);
    }
  };

  useEffect(() => {
    const abort = new AbortController();
    void reload();
    void followTaskEvents(session, taskId, 0, (events) => {
      setLive((state) => applyEvents(state, events));
      // Status changes come as events other than deltas: read the task again then.
      if (events.some((event) => !event.type.endsWith('.delta') && event.type !== 'chat.completion.chunk' && event.type !== 'model.pull.progress')) void reload();
    }, abort.signal, setRefusal, setMode).catch((failure: Error) => setError(failure));
    return () => abort.abort();
  }, [taskId]);

  const firstShown = live.events[0]?.sequence_number ?? 1;
  const showEarlier = async () => {
    setEarlierError(null);
    const from = Math.max(0, firstShown - 1 - LOG_ROWS);
    try {
      const page = await request<List<TaskEvent>>(session, 'GET',
        `v1/tasks/${encodeURIComponent(taskId)}/events?starting_after=${from}&limit=${firstShown - 1 - from}`);
      setLive((state) => withEarlier(state, page.data));
    } catch (failure) {
      setEarlierError((failure as Error).message);
    }
  };

  const cancel = async () => {
    setCancelOutcome(null);
    try {
      const next = await request<Task>(session, 'POST', `v1/tasks/${encodeURIComponent(taskId)}/cancel`);
      setTask(next);
      setCancelOutcome({ accepted: true });
      announce(`Cancel accepted; task ${next.status}.`);
    } catch (failure) {
      setCancelOutcome({ accepted: false, message: (failure as Error).message });
    }
  };
  // LMSP 7.4: an accepted cancel ends the task cancelled; the notice says so once it has.
  const cancelMessage = !cancelOutcome ? null
    : !cancelOutcome.accepted ? cancelOutcome.message
      : task?.status === 'cancelled' ? 'The task was cancelled.' : 'Cancel accepted: the task stops within a second.';

  const streaming = task ? isUnfinished(task.status) : !live.ended;
  // No such task (or not this session's): the message alone, not an empty output "followed live".
  // A service out of reach is no answer: the page goes on and fills in once it is back.
  if (error && !task && !(error instanceof ApiError && error.status === 0)) {
    return (
      <>
        <p class="crumbs"><a href={href('tasks')}>Tasks</a> / <Code>{taskId}</Code></p>
        <PageHeading>Task <Code>{taskId}</Code></PageHeading>
        <ErrorNotice error={error} />
      </>
    );
  }
  return (
    <>
      <p class="crumbs"><a href={href('tasks')}>Tasks</a> / <Code>{taskId}</Code></p>
      <PageHeading>Task <Code>{taskId}</Code></PageHeading>
      <ErrorNotice error={error} />
      {refusal && <Notice>{refusal.message} This page asks again by itself.</Notice>}
      {task && (
        <section class="panel" aria-labelledby="task-summary">
          <h2 id="task-summary">Summary</h2>
          <dl class="facts">
            <div><dt>Status</dt><dd><StatusBadge status={task.status} /></dd></div>
            <div><dt>Kind</dt><dd>{task.kind}</dd></div>
            <div><dt>Model</dt><dd>{task.model}</dd></div>
            <div><dt>Client</dt><dd><ClientName id={task.client_id} /></dd></div>
            <div><dt>Created</dt><dd>{formatTime(task.created_at)}</dd></div>
            <div><dt>Run time</dt><dd>{formatRunTime(task)}</dd></div>
            <div><dt>Attempt</dt><dd>{task.attempt}</dd></div>
            <div><dt>On restart</dt><dd>{task.on_restart}</dd></div>
            {/* The summary is read once; the log followed live may be further on. */}
            <div><dt>Events</dt><dd>{Math.max(task.last_sequence_number, live.eventCount)}</dd></div>
            {task.error && <div><dt>Error</dt><dd><code>{task.error.code}</code> {task.error.message}</dd></div>}
          </dl>
          {isUnfinished(task.status) && (
            <button type="button" class="danger" onClick={cancel} disabled={task.status === 'cancelling'}>
              {task.status === 'cancelling' ? 'Cancelling…' : 'Cancel task'}
            </button>
          )}
          {/* The button goes away or waits: the notice takes the focus it had. */}
          {cancelMessage && <Notice focus kind={cancelOutcome?.accepted === false ? 'error' : 'note'}>{cancelMessage}</Notice>}
        </section>
      )}
      {task?.kind === 'model_pull' ? (
        // A pull writes a file, not text: its progress is its output.
        <section class="panel" aria-labelledby="task-output">
          <h2 id="task-output">Download</h2>
          <PullProgress pull={live.pull} />
          {!live.pull && <p class="empty">{streaming ? 'Not started yet.' : 'No progress was reported.'}</p>}
        </section>
      ) : (
        <section class="panel" aria-labelledby="task-output">
          <h2 id="task-output">Output</h2>
          {/* A polite live region, busy while text streams in: screen readers read it once settled. */}
          <ScrollText label="Output" class="output" aria-live="polite" aria-busy={streaming ? 'true' : 'false'} data-testid="output">{live.text}</ScrollText>
          {!live.text && <p class="empty">{streaming ? 'No output yet.' : 'No output.'}</p>}
        </section>
      )}
      {task?.kind === 'response' && task.response_id && <ResponseDetails responseId={task.response_id} taskStatus={task.status} />}
      <section class="panel" aria-labelledby="task-events">
        <h2 id="task-events">Event log</h2>
        <p class="help">
          {live.eventCount} {live.eventCount === 1 ? 'event' : 'events'}{firstShown > 1 ? `; from #${firstShown} on are shown` : ''}. {refusal ? (refusal.status === 0 ? 'Reconnecting.' : 'Waiting for the service to allow another event stream.') : streaming ? FOLLOWING[mode] : 'The log is complete.'}
        </p>
        {firstShown > 1 && <button type="button" class="log-earlier" onClick={showEarlier}>Show earlier events</button>}
        {earlierError && <Notice kind="error">{earlierError}</Notice>}
        <div class="table-wrap log" ref={log} tabIndex={0} role="region" aria-label="Event log, scrollable" onScroll={(event) => {
          // The scroll event of the page's own scrolling comes after more rows may have arrived:
          // judged by the height then, it would look like a reader scrolling back.
          const element = event.currentTarget;
          if (followedTo.current !== null && element.scrollTop >= followedTo.current - 1) return;
          followedTo.current = null;
          logAtEnd.current = element.scrollTop + element.clientHeight >= element.scrollHeight - 8;
        }}>
          <table>
            <caption class="visually-hidden">Events of task {taskId}</caption>
            <thead><tr><th scope="col">#</th><th scope="col">Type</th><th scope="col">Time</th><th scope="col">Detail</th></tr></thead>
            <tbody>
              {live.events.map((event) => (
                <tr key={event.sequence_number}>
                  <td class="number">{event.sequence_number}</td>
                  <td><code>{event.type}</code></td>
                  <td>{new Date(event.created_at * 1000).toLocaleTimeString()}</td>
                  <td class="detail">{eventSummary(event)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </section>
    </>
  );
}
