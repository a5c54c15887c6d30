/**
 * Models (LMSP 5): the registry, and pulling a model (LMSP 5.1: `POST /v1/models/pull` makes a
 * `model_pull` task whose events report the bytes downloaded). A service that cannot pull (an
 * older build: the route answers 404, or its capabilities say `model_pull: false`) gets a note
 * instead of a form that cannot work.
 */
import { useEffect, useState } from 'preact/hooks';
import { formatBytes, formatCount, formatNumber } from '../format.js';
import { href } from '../router.js';
import { ApiError, hasScope, request } from '../session.js';
import { followTaskEvents } from '../stream.js';
import { Code, ErrorNotice, Notice, PageHeading, StatusBadge, TableRegion, useApp, usePoll } from '../ui.js';
import { isUnfinished, type List, type Model, type Service, type Task } from '../wire.js';
import { applyEvents, EMPTY_LIVE, PullProgress, type LiveState } from './task.js';
import { REFRESH_MS } from './tasks.js';

const PULL_UNAVAILABLE = 'This service cannot pull models: POST /v1/models/pull is not available in this version of lmsp. Register a file with `lmsp models add PATH` instead.';

function PullRow({ task, onChanged }: { task: Task; onChanged: () => void }) {
  const { session, announce } = useApp();
  const [live, setLive] = useState<LiveState>(EMPTY_LIVE);
  const [status, setStatus] = useState(task.status);
  const [refused, setRefused] = useState<string | null>(null);
  useEffect(() => setStatus(task.status), [task.status]);
  useEffect(() => {
    if (!isUnfinished(task.status)) return;
    const abort = new AbortController();
    void followTaskEvents(session, task.id, 0, (events) => {
      setLive((state) => applyEvents(state, events));
      // The row's badge follows the pull's own events; the list's poll catches up on the rest.
      if (events.some((event) => /^model\.pull\.(cancelling|completed|failed|cancelled)$/.test(event.type))) onChanged();
    }, abort.signal).catch(() => undefined);
    return () => abort.abort();
  }, [task.id, isUnfinished(task.status)]);
  // LMSP 5.1 and 7.4: cancelling a pull stops its download and removes the partial file.
  const cancel = async () => {
    setRefused(null);
    try {
      const next = await request<Task>(session, 'POST', `v1/tasks/${encodeURIComponent(task.id)}/cancel`);
      setStatus(next.status);
      announce(`Pull of ${task.model} ${next.status}.`);
      onChanged();
    } catch (failure) {
      setRefused((failure as Error).message);
    }
  };
  return (
    <li>
      <strong>{task.model}</strong> <StatusBadge status={status} /> <a href={href('tasks', task.id)}><Code>{task.id}</Code></a>
      {isUnfinished(status) && (
        <button type="button" class="danger small" onClick={cancel} disabled={status === 'cancelling'}
          aria-label={`Cancel the pull of ${task.model}`}>{status === 'cancelling' ? 'Cancelling…' : 'Cancel'}</button>
      )}
      {/* Why it failed, in the service's words: the code alone does not say which URL or status. */}
      {task.error && <p class="pull-error"><code class="error-code">{task.error.code}</code> {task.error.message}</p>}
      {refused && <Notice kind="error">{refused}</Notice>}
      {isUnfinished(status) && <PullProgress pull={live.pull} />}
    </li>
  );
}

function PullForm({ available, onPulled }: { available: boolean; onPulled: () => void }) {
  const { session, announce } = useApp();
  const [source, setSource] = useState('');
  const [id, setId] = useState('');
  const [digest, setDigest] = useState('');
  const [message, setMessage] = useState<{ kind: 'error' | 'success' | 'note'; text: string } | null>(null);
  const [missing, setMissing] = useState(!available);
  const [busy, setBusy] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    if (busy) return;
    setBusy(true);
    setMessage(null);
    try {
      const task = await request<Task>(session, 'POST', 'v1/models/pull', {
        source: source.trim(), ...(id.trim() ? { id: id.trim() } : {}), ...(digest.trim() ? { digest: digest.trim() } : {}),
      });
      setMessage({ kind: 'success', text: `Pull started as task ${task.id}.` });
      // Emptied, so that a second press does not send the same pull again (409 model_exists).
      setSource('');
      setId('');
      setDigest('');
      announce('Pull started.');
      onPulled();
    } catch (failure) {
      if (failure instanceof ApiError && failure.status === 404 && /^No route/.test(failure.message)) setMissing(true);
      else setMessage({ kind: 'error', text: (failure as Error).message });
    } finally {
      setBusy(false);
    }
  };

  if (missing) return <Notice>{PULL_UNAVAILABLE}</Notice>;
  return (
    <form class="panel form" onSubmit={submit} aria-labelledby="pull-model">
      <h2 id="pull-model">Pull a model</h2>
      <div class="field">
        <label for="pull-source">Source</label>
        <input id="pull-source" value={source} onInput={(event) => setSource(event.currentTarget.value)} required
          placeholder="hf:OWNER/REPO/FILE.gguf" aria-describedby="pull-source-help" spellcheck={false} />
        <p id="pull-source-help" class="help">A file of a Hugging Face repository (<code>hf:OWNER/REPO/FILE.gguf</code>, optionally <code>@REVISION</code>) or an <code>https://</code> URL of a GGUF file.</p>
      </div>
      <div class="field-row">
        <div class="field">
          <label for="pull-id">Model id <span class="optional">(optional)</span></label>
          <input id="pull-id" value={id} onInput={(event) => setId(event.currentTarget.value)} spellcheck={false} />
        </div>
        <div class="field">
          <label for="pull-digest">Expected digest <span class="optional">(optional)</span></label>
          <input id="pull-digest" value={digest} onInput={(event) => setDigest(event.currentTarget.value)} placeholder="sha256:…" spellcheck={false} />
        </div>
      </div>
      {message && <Notice kind={message.kind}>{message.text}</Notice>}
      {/* Waiting, the button stays focusable (aria-disabled, not disabled), so the focus stays on it. */}
      <button type="submit" class="primary" aria-disabled={busy ? 'true' : undefined}>{busy ? 'Starting…' : 'Pull'}</button>
    </form>
  );
}

export function ModelsView() {
  const { session } = useApp();
  // A models:write token without models:read pulls models but does not read the registry.
  const canRead = hasScope(session, 'models:read');
  const models = usePoll(() => (canRead ? request<List<Model>>(session, 'GET', 'v1/models') : Promise.resolve(null)), REFRESH_MS * 2, []);
  const service = usePoll(() => request<Service>(null, 'GET', 'v1/service'), null, []);
  const canWrite = hasScope(session, 'models:write');
  // A models:write token reads its own pulls (and only them) through /v1/tasks, as a responses one does.
  const canSeePulls = hasScope(session, 'responses') || canWrite;
  const pulls = usePoll(() => (canSeePulls ? request<List<Task>>(session, 'GET', 'v1/tasks?kind=model_pull&limit=10') : Promise.resolve(null)), REFRESH_MS, []);
  const pullTasks = (pulls.data?.data ?? []).filter((task) => task.kind === 'model_pull').slice(0, 10);

  return (
    <>
      <PageHeading>Models</PageHeading>
      <p class="lead">GGUF files known by their SHA-256 digest. A model loads on first use and stays loaded for a while after its last one.</p>
      <ErrorNotice error={models.error} />
      {models.data && (
        <TableRegion label="Registered models">
          <table>
            <caption class="visually-hidden">Registered models</caption>
            <thead>
              <tr>
                <th scope="col">Model</th><th scope="col">Status</th><th scope="col">Size</th>
                <th scope="col">Architecture</th><th scope="col">Parameters</th><th scope="col">Quantization</th><th scope="col">Context</th><th scope="col">Digest</th>
              </tr>
            </thead>
            <tbody>
              {models.data.data.map((model) => (
                <tr key={model.id}>
                  <td><strong class="model-id">{model.id}</strong>{model.path && <div class="path">{model.path}</div>}</td>
                  <td><StatusBadge status={model.status} />{model.loaded && <div class="loaded">loaded</div>}</td>
                  <td>{formatBytes(model.size_bytes)}</td>
                  <td>{model.architecture ?? '-'}</td>
                  <td>{formatCount(model.parameters)}</td>
                  <td>{model.quantization ?? '-'}</td>
                  <td>{formatNumber(model.context_length)}</td>
                  <td><code class="digest" title={model.digest}>{model.digest.slice(0, 15)}…</code></td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableRegion>
      )}
      {canWrite && service.data && <PullForm available={service.data.capabilities.model_pull !== false} onPulled={pulls.refresh} />}
      {!canWrite && <p class="help">Pulling and registering models needs the <code>models:write</code> scope.</p>}
      {!canRead && <p class="help">The list of registered models needs the <code>models:read</code> scope; this session sees its own pulls.</p>}
      {pullTasks.length > 0 && (
        <section class="panel" aria-labelledby="pulls">
          <h2 id="pulls">Pulls</h2>
          <ul class="pulls">{pullTasks.map((task) => <PullRow key={task.id} task={task} onChanged={pulls.refresh} />)}</ul>
        </section>
      )}
    </>
  );
}
