/** The page: sign-in, or the console with its sections (LMSP 15). */
import { useEffect, useMemo, useState } from 'preact/hooks';
import { MetricsSampler } from './metrics.js';
import { useRoute, href } from './router.js';
import { forgetSession, hasScope, loadSession, revokeSession, saveSession, whenTokenRejected, type Session } from './session.js';
import { SignIn } from './sign-in.js';
import { Context, focusNextView, Notice, PageHeading, type AppContext } from './ui.js';
import { ChatView } from './views/chat.js';
import { ClientsView } from './views/clients.js';
import { ModelsView } from './views/models.js';
import { OverviewView } from './views/overview.js';
import { ResponsesView } from './views/responses.js';
import { TaskView } from './views/task.js';
import { TasksView } from './views/tasks.js';

interface Section {
  path: string;
  label: string;
  /** Shown only with one of these scopes (admin has every scope). */
  scopes?: string[];
  /** A record's own page (`#/tasks/ID`) is reachable with these too. */
  recordScopes?: string[];
}

const SECTIONS: Section[] = [
  { path: '', label: 'Overview' },
  // A models:write client reads its own pulls' tasks (linked from the Models view).
  { path: 'tasks', label: 'Tasks', scopes: ['responses'], recordScopes: ['models:write'] },
  { path: 'responses', label: 'Responses', scopes: ['responses'] },
  { path: 'chat', label: 'Chat completions', scopes: ['responses'] },
  // LMSP 15: the registry (models:read), and the pull form with the session's own pulls (models:write).
  { path: 'models', label: 'Models', scopes: ['models:read', 'models:write'] },
  { path: 'clients', label: 'Clients', scopes: ['admin'] },
];

function reaches(session: Session, section: Section, record = false): boolean {
  const scopes = section.scopes && [...section.scopes, ...(record ? section.recordScopes ?? [] : [])];
  return !scopes || scopes.some((scope) => hasScope(session, scope));
}

/**
 * A view this session's scopes do not reach (opened by its address: the sections list leaves it
 * out): it says which scope it needs instead of showing forms the service would refuse.
 */
function NeedsScope({ section, session }: { section: Section; session: Session }) {
  const needed = section.scopes?.join(' or ') ?? '';
  return (
    <>
      <PageHeading>{section.label}</PageHeading>
      <Notice>
        This view needs the <code>{needed}</code> scope, and this session has {session.client.scopes.join(', ')}.
        Sign in with a pairing code for a client with that scope (<code>lmsp pair --scopes {section.scopes?.[0]}</code>).
      </Notice>
    </>
  );
}

function View({ route, sampler, session }: { route: string[]; sampler: MetricsSampler | null; session: Session }) {
  const [section, id] = route;
  const known = SECTIONS.find((candidate) => candidate.path === (section ?? ''));
  if (known && !reaches(session, known, id !== undefined)) return <NeedsScope section={known} session={session} />;
  switch (section ?? '') {
    case '':
      return <OverviewView sampler={sampler} />;
    case 'tasks':
      return id ? <TaskView key={id} taskId={id} /> : <TasksView />;
    case 'responses':
      return <ResponsesView />;
    case 'chat':
      return <ChatView completionId={id ?? null} />;
    case 'models':
      return <ModelsView />;
    case 'clients':
      return <ClientsView />;
    default:
      return (
        <>
          <PageHeading>Not found</PageHeading>
          <p>There is no such view. <a href={href()}>Go to the overview.</a></p>
        </>
      );
  }
}

export function App() {
  const [session, setSession] = useState<Session | null>(loadSession);
  const [signedOutReason, setSignedOutReason] = useState<string | null>(null);
  const [announcement, setAnnouncement] = useState('');
  const route = useRoute();

  const signOut = (reason: string | null) => {
    forgetSession();
    setSession(null);
    setSignedOutReason(reason);
  };
  // A request refused after this tab signed out (one still under way) says nothing new.
  useEffect(() => whenTokenRejected((message) => {
    if (loadSession()) signOut(message);
  }), []);
  const signOutByUser = async (ending: Session) => {
    signOut('Signing out…');
    const revoked = await revokeSession(ending);
    setSignedOutReason(revoked === 'revoked'
      ? 'You signed out: the token of this session was revoked.'
      : revoked === 'refused'
        ? 'You signed out and this tab forgot the token. A metrics token cannot revoke itself: revoke the client from Clients, or with lmsp clients revoke.'
        : 'You signed out and this tab forgot the token, but the service could not be reached to revoke it: revoke the client from Clients, or with lmsp clients revoke.');
  };

  // One sampler of /metrics for the whole session, so the chart keeps its history across views.
  const sampler = useMemo(() => (session && hasScope(session, 'metrics') ? new MetricsSampler(session) : null), [session]);
  useEffect(() => {
    sampler?.start();
    return () => sampler?.stop();
  }, [sampler]);

  const context = useMemo<AppContext | null>(() => (session ? { session, announce: setAnnouncement } : null), [session]);

  if (!session || !context) {
    return <SignIn reason={signedOutReason} onSignedIn={(next) => {
      saveSession(next);
      setSignedOutReason(null);
      focusNextView();
      setSession(next);
    }} />;
  }

  const current = route[0] ?? '';
  return (
    <Context.Provider value={context}>
      <a class="skip-link" href="#main" onClick={(event) => {
        event.preventDefault();
        document.getElementById('main')?.focus();
      }}>Skip to content</a>
      <header class="top">
        <a class="brand" href={href()}>lmsp</a>
        <p class="who">
          Signed in as <strong>{session.client.name}</strong>
          <span class="scopes"> ({session.client.scopes.join(', ')})</span>
        </p>
        <button type="button" class="quiet" onClick={() => void signOutByUser(session)}>Sign out</button>
      </header>
      <nav class="sections" aria-label="Sections">
        <ul>
          {SECTIONS.filter((section) => reaches(session, section)).map((section) => (
            <li key={section.path}>
              <a href={href(...(section.path ? [section.path] : []))} aria-current={current === section.path ? 'page' : undefined}>{section.label}</a>
            </li>
          ))}
        </ul>
      </nav>
      <main id="main" tabIndex={-1}>
        <View key={current} route={route} sampler={sampler} session={session} />
      </main>
      <div class="visually-hidden" role="status" aria-live="polite">{announcement}</div>
    </Context.Provider>
  );
}
