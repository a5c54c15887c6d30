/** Small pieces every view shares: headings that take focus, status badges, notes, polling. */
import type { ComponentChildren } from 'preact';
import { createContext } from 'preact';
import { useCallback, useContext, useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { formatAgo, formatTime } from './format.js';
import { ApiError, type Session } from './session.js';

export interface AppContext {
  session: Session;
  /** Says something to screen readers through the page's live region. */
  announce: (message: string) => void;
}

export const Context = createContext<AppContext | null>(null);

export function useApp(): AppContext {
  const context = useContext(Context);
  if (!context) throw new Error('useApp outside the signed-in app');
  return context;
}

/** Whether a view has been shown since the page loaded. */
let viewShown = false;

/** The next view takes the focus even if it is the first one shown (after signing in, the form it replaces had it). */
export function focusNextView(): void {
  viewShown = true;
}

/**
 * A view's title. When the view changes it takes the focus, so keyboard and screen-reader users
 * land on the new content; the first view of a page load leaves the focus at the top of the page,
 * where the skip link is.
 */
export function PageHeading({ children }: { children: ComponentChildren }) {
  const heading = useRef<HTMLHeadingElement>(null);
  useLayoutEffect(() => {
    if (viewShown) heading.current?.focus();
    viewShown = true;
  }, []);
  // The tab's title names the view too (history, tab strips, and the first thing a screen reader says).
  useLayoutEffect(() => {
    document.title = `${heading.current?.textContent ?? ''} · lmsp`;
  });
  return <h1 ref={heading} tabIndex={-1}>{children}</h1>;
}

/**
 * A table in a region of its own that scrolls sideways when the table is wider than the page:
 * focusable and named, so a keyboard can scroll it too (axe: scrollable-region-focusable).
 */
export function TableRegion({ label, children }: { label: string; children: ComponentChildren }) {
  return <div class="table-wrap" tabIndex={0} role="region" aria-label={label}>{children}</div>;
}

/**
 * Text in a box of bounded height (messages, instructions, output). A box whose text overflows
 * scrolls, and a scrolling box must be reachable by keyboard (axe: scrollable-region-focusable):
 * it then becomes a named region in the tab order. A box that fits stays out of the tab order, so
 * a page of short messages is not a page of tab stops.
 */
export function ScrollText({ label, class: className = 'message', children, ...rest }: { label: string; class?: string; children: ComponentChildren } & Record<string, unknown>) {
  const element = useRef<HTMLPreElement>(null);
  const [scrolls, setScrolls] = useState(false);
  const measure = useCallback(() => {
    const box = element.current;
    if (box) setScrolls(box.scrollHeight > box.clientHeight + 1);
  }, []);
  // Measured after every render (the text may have grown) and when the box is resized.
  useLayoutEffect(measure);
  useEffect(() => {
    const box = element.current;
    if (!box || typeof ResizeObserver === 'undefined') return;
    const observer = new ResizeObserver(measure);
    observer.observe(box);
    return () => observer.disconnect();
  }, [measure]);
  return (
    <pre {...rest} ref={element} class={className} tabIndex={scrolls ? 0 : undefined} role={scrolls ? 'region' : undefined} aria-label={scrolls ? `${label}, scrollable` : undefined}>
      {children}
    </pre>
  );
}

export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge status-${status.replace(/[^a-z_]/g, '')}`}>{status}</span>;
}

/**
 * A notice; with `focus`, it takes the keyboard focus when it appears, for a notice that replaces
 * the control that was used (a button that goes away or waits), so focus is not dropped on the page.
 */
export function Notice({ kind = 'note', focus = false, children }: { kind?: 'note' | 'error' | 'success'; focus?: boolean; children: ComponentChildren }) {
  const element = useRef<HTMLParagraphElement>(null);
  useLayoutEffect(() => {
    if (focus) element.current?.focus();
  }, []);
  return <p ref={element} class={`notice notice-${kind}`} role={kind === 'error' ? 'alert' : undefined} tabIndex={focus ? -1 : undefined}>{children}</p>;
}

export function Ago({ seconds }: { seconds: number | null | undefined }) {
  if (seconds === null || seconds === undefined) return <span>-</span>;
  return <time dateTime={new Date(seconds * 1000).toISOString()} title={formatTime(seconds)}>{formatAgo(seconds)}</time>;
}

export function Code({ children }: { children: ComponentChildren }) {
  return <code class="id">{children}</code>;
}

export interface Polled<T> {
  data: T | null;
  error: Error | null;
  refresh: () => void;
}

/** How soon a load done once is tried again after the service could not be reached. */
const UNREACHABLE_RETRY_MS = 2000;

/**
 * Runs `load` now and every `intervalMs` (null: once, or until it reaches the service) while the
 * tab is visible; `deps` and a new interval restart it. A failed load keeps the last data and
 * shows the error.
 */
export function usePoll<T>(load: () => Promise<T>, intervalMs: number | null, deps: unknown[]): Polled<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<Error | null>(null);
  const [tick, setTick] = useState(0);
  const refresh = useCallback(() => setTick((value) => value + 1), []);
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | null = null;
    const run = async () => {
      if (!live) return;
      let next = intervalMs;
      if (document.visibilityState !== 'hidden') {
        try {
          const value = await load();
          if (live) {
            setData(value);
            setError(null);
          }
        } catch (failure) {
          if (live) setError(failure as Error);
          // A load done once that found the service away (restarting, say) is done again until it
          // answers: the page fills in by itself once the service is back.
          if (failure instanceof ApiError && failure.status === 0) next ??= UNREACHABLE_RETRY_MS;
        }
      } else if (next === null) {
        next = UNREACHABLE_RETRY_MS; // hidden before its first load: load once it is shown
      }
      if (live && next !== null) timer = setTimeout(() => void run(), next);
    };
    void run();
    return () => {
      live = false;
      if (timer) clearTimeout(timer);
    };
  }, [...deps, tick, intervalMs]);
  return { data, error, refresh };
}

export function ErrorNotice({ error }: { error: Error | null }) {
  return error ? <Notice kind="error">{error.message}</Notice> : null;
}

/** Where a list newest first is paged to: the `after` cursor of each page past the first. */
export interface Pages {
  after: string | null;
  /** 0 for the newest page. */
  index: number;
  older: (lastId: string) => void;
  newer: () => void;
  reset: () => void;
}

export function usePages(): Pages {
  const [cursors, setCursors] = useState<string[]>([]);
  return {
    after: cursors.at(-1) ?? null,
    index: cursors.length,
    older: (lastId) => setCursors((list) => [...list, lastId]),
    newer: () => setCursors((list) => list.slice(0, -1)),
    reset: () => setCursors([]),
  };
}

/** Newer and Older buttons under a paged list; the focus stays on the button pressed while it remains. */
export function PageControls({ pages, hasMore, lastId, label }: { pages: Pages; hasMore: boolean; lastId: string | null; label: string }) {
  if (pages.index === 0 && !hasMore) return null;
  return (
    <nav class="pager" aria-label={`Pages of ${label}`}>
      <button type="button" class="quiet" aria-disabled={pages.index === 0 ? 'true' : undefined}
        onClick={() => pages.index > 0 && pages.newer()}>Newer</button>
      <span>page {pages.index + 1}</span>
      <button type="button" class="quiet" aria-disabled={!hasMore || !lastId ? 'true' : undefined}
        onClick={() => hasMore && lastId && pages.older(lastId)}>Older</button>
    </nav>
  );
}
