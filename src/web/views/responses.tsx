/** Responses (LMSP 6): start one in the background, and the latest ones with their tasks. */
import { useState } from 'preact/hooks';
import { href, navigate } from '../router.js';
import { hasScope, request } from '../session.js';
import { Ago, Code, ErrorNotice, Notice, PageControls, PageHeading, StatusBadge, TableRegion, useApp, usePages, usePoll } from '../ui.js';
import type { List, Model, Response, Task } from '../wire.js';
import { PAGE_SIZE, REFRESH_MS } from './tasks.js';

function NewResponseForm() {
  const { session, announce } = useApp();
  const models = usePoll(() => (hasScope(session, 'models:read')
    ? request<List<Model>>(session, 'GET', 'v1/models')
    : Promise.resolve({ object: 'list', data: [], has_more: false } as List<Model>)), null, []);
  const [model, setModel] = useState('lmsp-tiny');
  const [input, setInput] = useState('');
  const [instructions, setInstructions] = useState('');
  const [maxTokens, setMaxTokens] = useState('256');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const choices = models.data?.data.filter((candidate) => candidate.status === 'ready') ?? [];

  const submit = async (event: Event) => {
    event.preventDefault();
    if (busy) return;
    setBusy(true);
    setError(null);
    try {
      const created = await request<Response>(session, 'POST', 'v1/responses', {
        model,
        input,
        ...(instructions.trim() ? { instructions } : {}),
        max_output_tokens: Number(maxTokens),
        background: true,
      });
      announce('Response created.');
      if (created.task) navigate('tasks', created.task.id);
    } catch (failure) {
      setError((failure as Error).message);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="panel form" onSubmit={submit} aria-labelledby="new-response">
      <h2 id="new-response">New response</h2>
      <p class="help">Runs in the background (<code>background: true</code>): it is on disk before the service answers, and it goes on if you leave this page.</p>
      <div class="field-row">
        <div class="field">
          <label for="response-model">Model</label>
          {choices.length > 0 ? (
            <select id="response-model" value={model} onChange={(event) => setModel(event.currentTarget.value)}>
              {choices.map((choice) => <option key={choice.id} value={choice.id}>{choice.id}</option>)}
            </select>
          ) : (
            <input id="response-model" value={model} onInput={(event) => setModel(event.currentTarget.value)} required />
          )}
        </div>
        <div class="field">
          <label for="response-max-tokens">Max output tokens</label>
          <input id="response-max-tokens" type="number" min={1} value={maxTokens} onInput={(event) => setMaxTokens(event.currentTarget.value)} required />
        </div>
      </div>
      <div class="field">
        <label for="response-instructions">Instructions <span class="optional">(optional)</span></label>
        <input id="response-instructions" value={instructions} onInput={(event) => setInstructions(event.currentTarget.value)} />
      </div>
      <div class="field">
        <label for="response-input">Input</label>
        <textarea id="response-input" rows={3} value={input} onInput={(event) => setInput(event.currentTarget.value)} required />
      </div>
      {error && <Notice kind="error">{error}</Notice>}
      <button type="submit" class="primary" aria-disabled={busy ? 'true' : undefined}>{busy ? 'Creating…' : 'Create response'}</button>
    </form>
  );
}

export function ResponsesView() {
  const { session } = useApp();
  const pages = usePages();
  const tasks = usePoll(() => request<List<Task>>(session, 'GET',
    `v1/tasks?kind=response&limit=${PAGE_SIZE}${pages.after ? `&after=${encodeURIComponent(pages.after)}` : ''}`), REFRESH_MS, [pages.after]);
  const responses = (tasks.data?.data ?? []).filter((task) => task.kind === 'response' && task.response_id);
  return (
    <>
      <PageHeading>Responses</PageHeading>
      <p class="lead">OpenAI-compatible responses. Each runs as a durable task: open one to follow its text live, read its request and cancel it.</p>
      <NewResponseForm />
      <section aria-labelledby="latest-responses">
        <h2 id="latest-responses">Latest responses</h2>
        <ErrorNotice error={tasks.error} />
        {tasks.data && responses.length === 0 && <p class="empty">No responses yet.</p>}
        {responses.length > 0 && (
          <TableRegion label="Latest responses, table">
            <table>
              <caption class="visually-hidden">Latest responses</caption>
              <thead><tr><th scope="col">Response</th><th scope="col">Model</th><th scope="col">Task status</th><th scope="col">Created</th></tr></thead>
              <tbody>
                {responses.map((task) => (
                  <tr key={task.id}>
                    <td><a href={href('tasks', task.id)}><Code>{task.response_id}</Code></a></td>
                    <td>{task.model}</td>
                    <td><StatusBadge status={task.status} /></td>
                    <td><Ago seconds={task.created_at} /></td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableRegion>
        )}
        {tasks.data && <PageControls pages={pages} hasMore={tasks.data.has_more} lastId={tasks.data.data.at(-1)?.id ?? null} label="responses" />}
      </section>
    </>
  );
}
