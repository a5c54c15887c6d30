/** Clients and pairing codes (LMSP 4, scope `admin`): list, revoke, make a code. */
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { formatTime } from '../format.js';
import { request } from '../session.js';
import { Ago, Code, ErrorNotice, Notice, PageControls, PageHeading, TableRegion, useApp, usePages, usePoll } from '../ui.js';
import { SCOPES, type Client, type List, type PairingCode } from '../wire.js';
import { PAGE_SIZE } from './tasks.js';

const TTLS = [
  { seconds: 600, label: '10 minutes' },
  { seconds: 3600, label: '1 hour' },
  { seconds: 86400, label: '1 day' },
];

function PairingCodeForm({ onMade }: { onMade: () => void }) {
  const { session, announce } = useApp();
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<string[]>(['responses', 'models:read']);
  const [ttl, setTtl] = useState(600);
  const [made, setMade] = useState<PairingCode | null>(null);
  const [error, setError] = useState<string | null>(null);
  const madeBox = useRef<HTMLDivElement>(null);
  // The code appears under the button, maybe below the fold: bring it into sight.
  useEffect(() => {
    if (made) madeBox.current?.scrollIntoView({ block: 'nearest' });
  }, [made]);

  const toggle = (scope: string, on: boolean) => setScopes((current) => (on ? [...current, scope] : current.filter((s) => s !== scope)));
  const submit = async (event: Event) => {
    event.preventDefault();
    setError(null);
    try {
      const code = await request<PairingCode>(session, 'POST', 'v1/pairing-codes', {
        ...(name.trim() ? { name: name.trim() } : {}), scopes, ttl_seconds: ttl,
      });
      setMade(code);
      // Said with the code itself: a screen reader need not go looking for it.
      announce(`Pairing code made: ${code.code}.`);
      onMade();
    } catch (failure) {
      setError((failure as Error).message);
    }
  };

  return (
    <form class="panel form" onSubmit={submit} aria-labelledby="make-code">
      <h2 id="make-code">Make a pairing code</h2>
      <p class="help">A code works once, until it expires. Whoever pairs with it gets a token with these scopes.</p>
      <div class="field">
        <label for="code-name">Name <span class="optional">(optional)</span></label>
        <input id="code-name" value={name} onInput={(event) => setName(event.currentTarget.value)} maxLength={200} />
      </div>
      <fieldset class="scopes-field">
        <legend>Scopes</legend>
        {SCOPES.map((scope) => (
          <label key={scope} class="check">
            <input type="checkbox" checked={scopes.includes(scope)} onChange={(event) => toggle(scope, event.currentTarget.checked)} />
            <code>{scope}</code>
          </label>
        ))}
      </fieldset>
      <div class="field">
        <label for="code-ttl">Valid for</label>
        <select id="code-ttl" value={ttl} onChange={(event) => setTtl(Number(event.currentTarget.value))}>
          {TTLS.map((option) => <option key={option.seconds} value={option.seconds}>{option.label}</option>)}
        </select>
      </div>
      {error && <Notice kind="error">{error}</Notice>}
      <button type="submit" class="primary" disabled={scopes.length === 0}>Make code</button>
      {made && (
        <div class="made-code" role="group" aria-labelledby="made-code-label" ref={madeBox}>
          <p id="made-code-label">Pairing code for {made.name ?? 'a new client'} ({made.scopes.join(', ')}), valid until {formatTime(made.expires_at)}:</p>
          <output class="code" data-testid="pairing-code">{made.code}</output>
        </div>
      )}
    </form>
  );
}

function RevokeButton({ client, onRevoked }: { client: Client; onRevoked: () => void }) {
  const { session, announce } = useApp();
  const [confirming, setConfirming] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const own = client.id === session.client.id;
  const first = useRef<HTMLButtonElement>(null);
  const keep = useRef<HTMLButtonElement>(null);
  const done = useRef<HTMLSpanElement>(null);
  /** The control the focus goes to once the row has changed (the button pressed goes away). */
  const focusNext = useRef<'keep' | 'first' | 'done' | null>(null);
  // Before the browser paints, in the same task as the change, so no keypress lands in between.
  useLayoutEffect(() => {
    const target = focusNext.current === 'keep' ? keep : focusNext.current === 'first' ? first : focusNext.current === 'done' ? done : null;
    if (target?.current) {
      target.current.focus();
      focusNext.current = null;
    }
  });
  const ask = () => {
    focusNext.current = 'keep';
    setConfirming(true);
  };
  const back = () => {
    focusNext.current = 'first';
    setConfirming(false);
  };
  const revoke = async () => {
    try {
      await request<Client>(session, 'DELETE', `v1/clients/${encodeURIComponent(client.id)}`);
      announce(`Client ${client.name} revoked.`);
      focusNext.current = 'done';
      onRevoked();
    } catch (failure) {
      setError((failure as Error).message);
      focusNext.current = 'first';
    }
    setConfirming(false);
  };
  if (client.revoked_at !== null) return <span ref={done} tabIndex={-1}>revoked <Ago seconds={client.revoked_at} /></span>;
  return (
    <span class="actions" onKeyDown={(event) => {
      if (confirming && event.key === 'Escape') back();
    }}>
      {confirming ? (
        <>
          {/* The accessible names begin with the visible words (WCAG 2.5.3), then say whose. */}
          <button type="button" class="danger" onClick={revoke} aria-label={`Revoke now: ${client.name}`}>Revoke now</button>
          <button type="button" class="quiet" ref={keep} onClick={back} aria-label={`Keep ${client.name}`}>Keep</button>
        </>
      ) : (
        <button type="button" ref={first} onClick={ask} aria-label={`Revoke ${client.name}${own ? ' (this session)' : ''}`}>Revoke</button>
      )}
      {error && <span class="error-code" role="alert"> {error}</span>}
    </span>
  );
}

export function ClientsView() {
  const { session } = useApp();
  // Newest pairings first, a page at a time (GET /v1/clients is paged as tasks are).
  const pages = usePages();
  const clients = usePoll(
    () => request<List<Client>>(session, 'GET', `v1/clients?limit=${PAGE_SIZE}${pages.after ? `&after=${encodeURIComponent(pages.after)}` : ''}`),
    5000, [pages.after]);
  return (
    <>
      <PageHeading>Clients</PageHeading>
      <p class="lead">Paired apps, agents and scripts. Revoking stops a token at once; the client's records stay.</p>
      <ErrorNotice error={clients.error} />
      {clients.data && (
        <TableRegion label="Paired clients">
          <table>
            <caption class="visually-hidden">Paired clients</caption>
            <thead>
              <tr><th scope="col">Name</th><th scope="col">Client</th><th scope="col">Scopes</th><th scope="col">Paired</th><th scope="col">Last used</th><th scope="col">Access</th></tr>
            </thead>
            <tbody>
              {clients.data.data.map((client) => (
                <tr key={client.id} class={client.revoked_at !== null ? 'revoked' : undefined}>
                  <td class="name">{client.name}{client.id === session.client.id && <span class="you"> (you)</span>}</td>
                  <td><Code>{client.id}</Code></td>
                  <td class="wrap">{client.scopes.join(', ')}</td>
                  <td><Ago seconds={client.created_at} /></td>
                  <td><Ago seconds={client.last_used_at} /></td>
                  <td><RevokeButton client={client} onRevoked={clients.refresh} /></td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableRegion>
      )}
      {clients.data && <PageControls pages={pages} hasMore={clients.data.has_more} lastId={clients.data.data.at(-1)?.id ?? null} label="clients" />}
      <PairingCodeForm onMade={clients.refresh} />
    </>
  );
}
