/**
 * Stored chat completions (LMSP 13): `GET /v1/chat/completions` and a completion's messages. A
 * service without them (an older build) answers 404; the page says so instead of failing.
 */
import { useEffect, useState } from 'preact/hooks';
import { formatNumber } from '../format.js';
import { href } from '../router.js';
import { ApiError, request } from '../session.js';
import { Ago, Code, ErrorNotice, Notice, PageHeading, ScrollText, TableRegion, useApp, usePoll } from '../ui.js';
import type { ChatCompletion, ChatMessage, List } from '../wire.js';
import { REFRESH_MS } from './tasks.js';

function isMissingRoute(error: Error | null): boolean {
  return error instanceof ApiError && error.status === 404 && error.code === 'not_found' && /^No route/.test(error.message);
}

function Unavailable() {
  return (
    <Notice>
      This service does not serve stored chat completions: <code>GET /v1/chat/completions</code> answered 404.
      Chat completions arrive with a newer version of lmsp.
    </Notice>
  );
}

function CompletionDetail({ id }: { id: string }) {
  const { session } = useApp();
  const path = `v1/chat/completions/${encodeURIComponent(id)}`;
  const completion = usePoll(() => request<ChatCompletion>(session, 'GET', path), null, [id]);
  const messages = usePoll(() => request<List<ChatMessage>>(session, 'GET', `${path}/messages?limit=100`), null, [id]);
  const answer = completion.data?.choices[0];
  return (
    <section class="panel" aria-labelledby="completion-detail">
      <h2 id="completion-detail">Completion <Code>{id}</Code></h2>
      {isMissingRoute(completion.error) ? <Unavailable /> : <ErrorNotice error={completion.error ?? messages.error} />}
      {completion.data && (
        <dl class="facts">
          <div><dt>Model</dt><dd>{completion.data.model}</dd></div>
          <div><dt>Created</dt><dd><Ago seconds={completion.data.created} /></dd></div>
          <div><dt>Finish reason</dt><dd>{answer?.finish_reason ?? '-'}</dd></div>
          <div><dt>Prompt tokens</dt><dd>{formatNumber(completion.data.usage?.prompt_tokens)}</dd></div>
          <div><dt>Completion tokens</dt><dd>{formatNumber(completion.data.usage?.completion_tokens)}</dd></div>
        </dl>
      )}
      {messages.data && (
        <>
          <h3>Messages</h3>
          <ol class="messages">
            {messages.data.data.map((message, index) => (
              <li key={message.id ?? index}><span class="role">{message.role}</span><ScrollText label={`Message ${index + 1}, ${message.role}`}>{message.content ?? ''}</ScrollText></li>
            ))}
          </ol>
        </>
      )}
      {answer && (
        <>
          <h3>Answer</h3>
          <ScrollText label="Answer">{answer.message.content ?? ''}</ScrollText>
        </>
      )}
    </section>
  );
}

export function ChatView({ completionId }: { completionId: string | null }) {
  const { session } = useApp();
  // A service without the route is asked once, not every few seconds.
  const [missing, setMissing] = useState(false);
  const list = usePoll(() => request<List<ChatCompletion>>(session, 'GET', 'v1/chat/completions?limit=50&order=desc'), missing ? null : REFRESH_MS * 2, []);
  useEffect(() => {
    if (isMissingRoute(list.error)) setMissing(true);
  }, [list.error]);
  return (
    <>
      <PageHeading>Chat completions</PageHeading>
      <p class="lead">Completions made with <code>POST /v1/chat/completions</code> and <code>store: true</code>, newest first.</p>
      {missing || isMissingRoute(list.error) ? <Unavailable /> : <ErrorNotice error={list.error} />}
      {completionId && <CompletionDetail id={completionId} />}
      {list.data && list.data.data.length === 0 && <p class="empty">No stored chat completions.</p>}
      {list.data && list.data.data.length > 0 && (
        <TableRegion label="Stored chat completions">
          <table>
            <caption class="visually-hidden">Stored chat completions</caption>
            <thead><tr><th scope="col">Completion</th><th scope="col">Model</th><th scope="col">Finish reason</th><th scope="col">Tokens</th><th scope="col">Created</th></tr></thead>
            <tbody>
              {list.data.data.map((completion) => (
                <tr key={completion.id}>
                  <td><a href={href('chat', completion.id)}><Code>{completion.id}</Code></a></td>
                  <td>{completion.model}</td>
                  <td>{completion.choices[0]?.finish_reason ?? '-'}</td>
                  <td>{formatNumber(completion.usage?.total_tokens)}</td>
                  <td><Ago seconds={completion.created} /></td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableRegion>
      )}
    </>
  );
}
