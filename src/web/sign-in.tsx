/** Signing in (LMSP 15): a pairing code made by the operator is exchanged for this tab's token. */
import { useLayoutEffect, useState } from 'preact/hooks';
import { pair, type Session } from './session.js';
import { Notice } from './ui.js';

export function SignIn({ onSignedIn, reason }: { onSignedIn: (session: Session) => void; reason: string | null }) {
  const [code, setCode] = useState('');
  const [name, setName] = useState('dashboard');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  useLayoutEffect(() => {
    document.title = 'Sign in · lmsp';
  }, []);

  const submit = async (event: Event) => {
    event.preventDefault();
    if (busy) return;
    setBusy(true);
    setError(null);
    try {
      onSignedIn(await pair(code, name.trim() || 'dashboard'));
    } catch (failure) {
      setError((failure as Error).message);
      setBusy(false);
    }
  };

  return (
    <main id="main" class="sign-in" tabIndex={-1}>
      <h1>Sign in to lmsp</h1>
      {reason && <p class="notice" role="status" data-testid="signed-out">{reason}</p>}
      <p>Make a pairing code on the machine that runs the service, and type it here:</p>
      <pre class="commands"><code>lmsp pair --name dashboard --scopes admin</code></pre>
      <p class="help">
        For a session that only watches, <code>--scopes responses,models:read,metrics</code>. The token the code is
        exchanged for stays in this tab only: it is forgotten when you close the tab, and revoked when you sign out
        (unless <code>metrics</code> is its only scope: such a token cannot revoke itself, so revoke it from Clients
        or with <code>lmsp clients revoke</code>).
      </p>
      <form class="panel form" onSubmit={submit}>
        <div class="field">
          <label for="pairing-code">Pairing code</label>
          <input id="pairing-code" name="code" value={code} onInput={(event) => setCode(event.currentTarget.value)}
            required autocomplete="off" autocapitalize="characters" spellcheck={false} placeholder="XXXX-XXXX"
            aria-describedby="pairing-code-help" class="code-input" autoFocus />
          <p id="pairing-code-help" class="help">Eight characters; dashes and case do not matter. A code works once.</p>
        </div>
        <div class="field">
          <label for="client-name">Name of this session</label>
          <input id="client-name" name="client_name" value={name} onInput={(event) => setName(event.currentTarget.value)} maxLength={200} />
        </div>
        {error && <Notice kind="error">{error}</Notice>}
        {/* Waiting, the button stays focusable (aria-disabled, not disabled), so the focus stays on it. */}
        <button type="submit" class="primary" aria-disabled={busy ? 'true' : undefined}>{busy ? 'Signing in…' : 'Sign in'}</button>
      </form>
    </main>
  );
}
