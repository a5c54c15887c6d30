/** A response's request, usage and metadata (LMSP 6), shown with its task. */
import { formatNumber } from '../format.js';
import { request } from '../session.js';
import { Code, ErrorNotice, ScrollText, useApp, usePoll } from '../ui.js';
import { isUnfinished, messageText, type InputMessage, type List, type Response } from '../wire.js';

/** How often a running response's usage is read again. */
const LIVE_REFRESH_MS = 1000;

export function ResponseDetails({ responseId, taskStatus }: { responseId: string; taskStatus: string }) {
  const { session } = useApp();
  const path = `v1/responses/${encodeURIComponent(responseId)}`;
  // Read again whenever the task's status changes, so the response's status keeps pace with the
  // task's, and every second while it runs, so its usage grows with the text (LMSP 6: an
  // unfinished response holds its output so far).
  const response = usePoll(() => request<Response>(session, 'GET', path), isUnfinished(taskStatus) ? LIVE_REFRESH_MS : null, [responseId, taskStatus]);
  const input = usePoll(() => request<List<InputMessage>>(session, 'GET', `${path}/input_items?order=asc&limit=100`), null, [responseId]);
  const value = response.data;
  return (
    <section class="panel" aria-labelledby="response-details">
      <h2 id="response-details">Response <Code>{responseId}</Code></h2>
      <ErrorNotice error={response.error ?? input.error} />
      {value && (
        <dl class="facts">
          <div><dt>Status</dt><dd>{value.status}</dd></div>
          <div><dt>Background</dt><dd>{value.background ? 'yes' : 'no'}</dd></div>
          <div><dt>Max output tokens</dt><dd>{value.max_output_tokens}</dd></div>
          <div><dt>Temperature</dt><dd>{value.temperature}</dd></div>
          <div><dt>Top p</dt><dd>{value.top_p}</dd></div>
          <div><dt>Seed</dt><dd>{value.seed}</dd></div>
          <div><dt>Input tokens</dt><dd>{formatNumber(value.usage?.input_tokens)}</dd></div>
          <div><dt>Output tokens</dt><dd>{formatNumber(value.usage?.output_tokens)}</dd></div>
          {value.previous_response_id && <div><dt>Continues</dt><dd><Code>{value.previous_response_id}</Code></dd></div>}
        </dl>
      )}
      {value && Object.keys(value.metadata).length > 0 && (
        <>
          <h3>Metadata</h3>
          <dl class="facts metadata">
            {Object.entries(value.metadata).map(([key, text]) => <div key={key}><dt>{key}</dt><dd>{text}</dd></div>)}
          </dl>
        </>
      )}
      {value?.instructions && (
        <>
          <h3>Instructions</h3>
          <ScrollText label="Instructions">{value.instructions}</ScrollText>
        </>
      )}
      {input.data && input.data.data.length > 0 && (
        <>
          <h3>Input</h3>
          <ol class="messages">
            {input.data.data.map((message, index) => (
              <li key={message.id ?? index}>
                <span class="role">{message.role}</span>
                <ScrollText label={`Input ${index + 1}, ${message.role}`}>{messageText(message.content)}</ScrollText>
              </li>
            ))}
          </ol>
        </>
      )}
    </section>
  );
}
