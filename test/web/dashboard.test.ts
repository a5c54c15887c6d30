/**
 * The dashboard in a real browser against the real service (LMSP 15): sign in with a pairing code,
 * follow a task's text as it is generated, cancel, revoke a client (whose session then ends), pull
 * a model, and no accessibility violation on any view. Screenshots go to
 * .lmsp-test/screenshots/ (git-ignored).
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { Locator, Page } from 'playwright-core';
import type { TaskObject } from '../../src/api/types.js';
import { NO_BROWSER, screenshot, axeViolations, signIn, withBrowser } from '../helpers/browser.js';
import { api, pairClient, waitFor, withService, type TestService } from '../helpers/service.js';

const VIEWS = [
  { hash: '#/', heading: 'Overview' },
  { hash: '#/tasks', heading: 'Tasks' },
  { hash: '#/responses', heading: 'Responses' },
  { hash: '#/chat', heading: 'Chat completions' },
  { hash: '#/models', heading: 'Models' },
  { hash: '#/clients', heading: 'Clients' },
];

async function openView(page: Page, service: TestService, hash: string, heading: string): Promise<void> {
  await page.goto(`${service.url}/${hash}`);
  await page.getByRole('heading', { level: 1, name: heading }).waitFor();
}

async function assertAccessible(page: Page, view: string): Promise<void> {
  const violations = await axeViolations(page);
  assert.deepEqual(violations, [], `accessibility violations on ${view}`);
}

/** A fact of the response panel beside a task (its Status, Output tokens...). */
function responseFact(page: Page, name: string): Locator {
  return page.locator('section[aria-labelledby="response-details"] .facts div').filter({ has: page.getByText(name, { exact: true }) }).locator('dd');
}

async function statusOf(page: Page): Promise<string> {
  return (await page.locator('.facts .badge').first().textContent()) ?? '';
}

describe('the dashboard in Chromium (LMSP 15)', { skip: NO_BROWSER ?? false }, () => {
  test('sign in with a pairing code: the token stays in sessionStorage; every view is accessible; sign out forgets it', () =>
    withService({}, (service) => withBrowser(async (browser) => {
      const page = await browser.newPage();
      await page.goto(`${service.url}/`);
      await page.getByRole('heading', { level: 1, name: 'Sign in to lmsp' }).waitFor();
      assert.equal(await page.title(), 'Sign in · lmsp');
      await screenshot(page, 'sign-in');
      await assertAccessible(page, 'sign-in');

      // A wrong code is refused with the service's message, and nothing is stored.
      await page.getByLabel('Pairing code').fill('ZZZZ-ZZZZ');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('alert').filter({ hasText: 'pairing code' }).waitFor();
      assert.equal(await page.evaluate('sessionStorage.length'), 0);

      await signIn(page, service, ['admin', 'metrics'], 'operator console');
      const stored = await page.evaluate("({ session: sessionStorage.getItem('lmsp.session'), local: localStorage.length, cookie: document.cookie })") as { session: string | null; local: number; cookie: string };
      const session = JSON.parse(stored.session!) as { token: string; client: { name: string } };
      assert.match(session.token, /^lmsp_[A-Za-z0-9_-]{43}$/);
      assert.equal(session.client.name, 'operator console');
      assert.equal(stored.local, 0, 'nothing in localStorage');
      assert.equal(stored.cookie, '', 'no cookie');
      assert.equal((await browser.context.cookies()).length, 0);

      // Work for the views to show.
      await service.client.createResponse({ model: 'lmsp-tiny', input: 'hello', max_output_tokens: 12 });
      for (const view of VIEWS) {
        await openView(page, service, view.hash, view.heading);
        if (view.hash === '#/') {
          await page.getByTestId('tokens-total').filter({ hasText: '12' }).waitFor();
          // The chart's caption names the span its samples cover, seconds here, not a minute.
          const caption = page.locator('figcaption').filter({ hasText: /over the last \d+(\.\d)? s\./ });
          await caption.waitFor({ timeout: 10_000 });
          const span = Number(/over the last (\d+(?:\.\d)?) s\./.exec((await caption.textContent()) ?? '')?.[1]);
          assert.ok(span > 0 && span < 60, `the caption's span: ${span} s`);
        }
        // The Client column names the client (the operator's token made the task).
        if (view.hash === '#/tasks') await page.getByRole('cell', { name: 'operator', exact: true }).waitFor();
        if (view.hash === '#/chat') await page.getByText('does not serve stored chat completions').or(page.locator('table, .empty')).first().waitFor();
        if (view.hash === '#/models') await page.getByRole('cell', { name: /^lmsp-tiny/ }).waitFor();
        // A context length is a count of tokens, written out (not rounded to '16.4 k').
        if (view.hash === '#/models') await page.getByRole('cell', { name: '16,384', exact: true }).waitFor({ timeout: 5000 });
        if (view.hash === '#/clients') await page.getByRole('cell', { name: 'operator console (you)' }).waitFor();
        // The tab's title names the view.
        assert.equal(await page.title(), `${view.heading} · lmsp`);
        // At 1280 px every table fits the page instead of scrolling sideways.
        const overflow = await page.locator('.table-wrap').evaluateAll((wraps) => wraps.map((wrap) => wrap.scrollWidth - wrap.clientWidth));
        assert.ok(overflow.every((pixels) => pixels <= 0), `a table of ${view.heading} scrolls sideways at 1280 px: ${overflow.join(', ')}`);
        await screenshot(page, `view-${view.heading.toLowerCase().replace(/ /g, '-')}`);
        await assertAccessible(page, view.heading);
      }

      // A phone: every view fits 390 px (tables scroll inside regions a keyboard can reach), and
      // every section stays in sight.
      await page.setViewportSize({ width: 390, height: 844 });
      for (const view of VIEWS) {
        await openView(page, service, view.hash, view.heading);
        if (view.hash === '#/clients') await page.getByRole('cell', { name: 'operator console (you)' }).waitFor();
        assert.ok(await page.evaluate('document.documentElement.scrollWidth') as number <= 390, `${view.heading} is wider than 390 px`);
        for (const name of [...VIEWS.map((other) => other.heading), 'Sign out']) {
          const control = name === 'Sign out' ? page.getByRole('button', { name }) : page.getByRole('navigation').getByRole('link', { name });
          const box = await control.boundingBox();
          assert.ok(box && box.x >= 0 && box.x + box.width <= 390, `${name} is in sight on ${view.heading} at 390 px`);
        }
        await screenshot(page, `view-${view.heading.toLowerCase().replace(/ /g, '-')}-390`);
        await assertAccessible(page, `${view.heading} at 390 px`);
      }
      await page.setViewportSize({ width: 1280, height: 900 });

      // Keyboard: on a page load the skip link is the first stop and leads to the view; a view
      // opened from the sections takes the focus on its heading.
      await page.goto(`${service.url}/#/tasks`);
      await page.reload();
      await page.getByRole('heading', { level: 1, name: 'Tasks' }).waitFor();
      await page.keyboard.press('Tab');
      assert.equal(await page.evaluate('document.activeElement?.textContent'), 'Skip to content');
      await page.keyboard.press('Enter');
      assert.equal(await page.evaluate('document.activeElement?.id'), 'main');
      await page.keyboard.press('Tab');
      assert.equal(await page.evaluate('document.activeElement?.getAttribute("name")'), 'status-filter', 'then the status filter');
      await page.getByRole('link', { name: 'Models' }).click();
      await page.getByRole('heading', { level: 1, name: 'Models' }).waitFor();
      // The heading takes the focus in an effect after the view renders: wait for it, with a deadline.
      await page.waitForFunction("document.activeElement?.tagName === 'H1'", undefined, { timeout: 5000 }).catch(() => undefined);
      assert.equal(await page.evaluate('document.activeElement?.tagName'), 'H1');

      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByRole('heading', { level: 1, name: 'Sign in to lmsp' }).waitFor();
      assert.equal(await page.evaluate("sessionStorage.getItem('lmsp.session')"), null);
      // Signing out ends the token at the service too, not only in the tab.
      await page.getByTestId('signed-out').filter({ hasText: 'was revoked' }).waitFor();
      const after = await fetch(`${service.url}/v1/clients/me`, { headers: { authorization: `Bearer ${session.token}` } });
      assert.equal(after.status, 401);
    })));

  test('a view out of a session\'s scopes says which scope it needs instead of showing forms the service would refuse', () =>
    withService({}, (service) => withBrowser(async (browser) => {
      const page = await browser.newPage();
      await signIn(page, service, ['responses'], 'reader');
      const sections = page.getByRole('navigation', { name: 'Sections' });
      assert.equal(await sections.getByRole('link', { name: 'Clients' }).count(), 0, 'no Clients section without admin');
      for (const [hash, heading, scope] of [['#/clients', 'Clients', 'admin'], ['#/models', 'Models', 'models:read or models:write']] as const) {
        await openView(page, service, hash, heading);
        await page.locator('.notice').filter({ hasText: `needs the ${scope} scope` }).waitFor();
        assert.equal(await page.getByRole('button').filter({ hasText: /Make code|Pull|Revoke/ }).count(), 0, `no form on ${heading}`);
        await assertAccessible(page, `${heading} without its scope`);
      }
      await screenshot(page, 'view-needs-scope');
    })));

  test('a background task streams into its page as it is generated, then its event log is complete', () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '30' } }, (service) => withBrowser(async (browser) => {
      const page = await browser.newPage();
      const client = await signIn(page, service, ['responses', 'models:read']);
      const created = (await client.createResponse({ model: 'lmsp-tiny', input: 'a story', max_output_tokens: 120, background: true, seed: 3 })).body;
      await page.goto(`${service.url}/#/tasks/${created.task.id}`);
      const output = page.getByTestId('output');
      // Part of the text is on the page while the task still runs.
      const partial = await waitFor(async () => {
        const text = (await output.textContent()) ?? '';
        return text.length > 0 && (await statusOf(page)) === 'running' ? text : null;
      }, { what: 'partial output while running' });
      await screenshot(page, 'task-streaming');
      await assertAccessible(page, 'task (streaming)');
      await page.locator('.facts .badge', { hasText: 'completed' }).waitFor({ timeout: 60_000 });

      const final = await service.client.getResponse(created.id);
      const text = final.output[0]!.content[0]!.text;
      assert.ok(partial.length < text.length && text.startsWith(partial), 'the text grew on the page');
      await waitFor(async () => (await output.textContent()) === text, { what: 'the whole text on the page' });
      const task = await service.client.getTask(created.task.id);
      await waitFor(async () => (await page.locator('.log tbody tr').count()) === task.last_sequence_number, { what: 'every event in the log' });
      assert.equal(await page.locator('.log tbody tr').last().locator('code').textContent(), 'response.incomplete');
      assert.equal(await output.getAttribute('aria-busy'), 'false');
      // The response beside it shows its final status and usage, without reloading the page.
      await responseFact(page, 'Status').filter({ hasText: final.status }).waitFor({ timeout: 10_000 });
      await responseFact(page, 'Output tokens').filter({ hasText: String(final.usage!.output_tokens) }).waitFor({ timeout: 10_000 });
      await screenshot(page, 'task-completed');
      await assertAccessible(page, 'task (completed)');
    })));

  test('a queued task\'s page follows it: the response beside it is queued, then in progress, then final', () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '30' } }, (service) => withBrowser(async (browser) => {
      const page = await browser.newPage();
      const client = await signIn(page, service, ['responses']);
      // The only slot is busy: the next task waits in the queue.
      await client.createResponse({ model: 'lmsp-tiny', input: 'first', max_output_tokens: 80, background: true });
      const created = (await client.createResponse({ model: 'lmsp-tiny', input: 'second', max_output_tokens: 20, background: true })).body;
      await page.goto(`${service.url}/#/tasks/${created.task.id}`);
      await page.locator('.facts .badge', { hasText: 'queued' }).waitFor();
      await responseFact(page, 'Status').filter({ hasText: 'queued' }).waitFor();
      await page.locator('.facts .badge', { hasText: 'running' }).waitFor({ timeout: 30_000 });
      await responseFact(page, 'Status').filter({ hasText: 'in_progress' }).waitFor({ timeout: 5000 });
      await page.locator('.facts .badge', { hasText: 'completed' }).waitFor({ timeout: 30_000 });
      const final = await service.client.getResponse(created.id);
      await responseFact(page, 'Status').filter({ hasText: final.status }).waitFor({ timeout: 5000 });
      await responseFact(page, 'Output tokens').filter({ hasText: String(final.usage!.output_tokens) }).waitFor({ timeout: 5000 });
    })));

  test('a task page refused its event stream by the limits (429) follows the task once a place frees up', () =>
    withService({ args: ['--max-streams', '1'], env: { LMSP_DEBUG_TOKEN_DELAY_MS: '30' } }, (service) => withBrowser(async (browser) => {
      const page = await browser.newPage();
      const client = await signIn(page, service, ['responses']);
      const created = (await client.createResponse({ model: 'lmsp-tiny', input: 'wait', max_output_tokens: 100, background: true })).body;
      // Another client holds the only event stream the service allows (LMSP 16).
      const holder = new AbortController();
      const held = await api(service, `/v1/tasks/${created.task.id}/events?stream=true`, { signal: holder.signal });
      assert.equal(held.status, 200);
      await page.goto(`${service.url}/#/tasks/${created.task.id}`);
      await page.getByText('This page asks again by itself').waitFor();
      await page.getByText('Waiting for the service to allow another event stream.').waitFor();
      await screenshot(page, 'task-stream-refused');
      await assertAccessible(page, 'task (stream refused)');

      holder.abort();
      await page.locator('.facts .badge', { hasText: 'completed' }).waitFor({ timeout: 60_000 });
      const task = await service.client.getTask(created.task.id);
      await waitFor(async () => (await page.locator('.log tbody tr').count()) === task.last_sequence_number, { what: 'every event in the log' });
      const final = await service.client.getResponse(created.id);
      assert.equal(await page.getByTestId('output').textContent(), final.output[0]!.content[0]!.text);
      assert.equal(await page.getByText('This page asks again by itself').count(), 0, 'the notice is gone once the stream is open');
      await page.getByText('The log is complete.').waitFor();
    })));

  test('cancel a running task from its page; the task list filters by status', () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '20' } }, (service) => withBrowser(async (browser) => {
      const page = await browser.newPage();
      const client = await signIn(page, service, ['responses']);
      const done = (await client.createResponse({ model: 'lmsp-tiny', input: 'short', max_output_tokens: 3 })).body;
      const long = (await client.createResponse({ model: 'lmsp-tiny', input: 'long', max_output_tokens: 5000, background: true })).body;
      await page.goto(`${service.url}/#/tasks/${long.task.id}`);
      await page.locator('.facts .badge', { hasText: 'running' }).waitFor();
      await page.getByRole('button', { name: 'Cancel task' }).click();
      await page.locator('.facts .badge', { hasText: 'cancelled' }).waitFor();
      assert.equal((await service.client.getTask(long.task.id)).status, 'cancelled');
      await screenshot(page, 'task-cancelled');

      await page.goto(`${service.url}/#/tasks`);
      await page.getByRole('heading', { level: 1, name: 'Tasks' }).waitFor();
      const rows = page.locator('tbody tr');
      await waitFor(async () => (await rows.count()) === 2, { what: 'both tasks listed' });
      await page.getByLabel('Cancelled').check();
      await waitFor(async () => (await rows.count()) === 1 && (await rows.first().textContent())!.includes(long.task.id), { what: 'the cancelled filter' });
      await page.getByLabel('Completed').check();
      await waitFor(async () => (await rows.count()) === 1 && (await rows.first().textContent())!.includes(done.task.id), { what: 'the completed filter' });
      // Timestamps are whole seconds (LMSP 2): a run time says no more than they know.
      const runTime = (await rows.first().locator('td').nth(5).textContent())!;
      assert.match(runTime, /^(under 1 s|\d+ s)$/, `the run time of a 3-token task: ${runTime}`);
      await page.getByLabel('Failed').check();
      await page.getByText('No failed tasks').waitFor();
    })));

  test('revoking a client from the Clients view ends that client\'s dashboard session', () =>
    withService({}, (service) => withBrowser(async (browser) => {
      const watcher = await browser.newPage();
      await signIn(watcher, service, ['responses'], 'watcher');
      await watcher.goto(`${service.url}/#/tasks`);
      const admin = await browser.context.newPage();
      await signIn(admin, service, ['admin'], 'admin');
      await admin.goto(`${service.url}/#/clients`);
      const row = admin.getByRole('row').filter({ hasText: 'watcher' });
      await row.getByRole('button', { name: 'Revoke watcher' }).click();
      await row.getByRole('button', { name: 'Revoke now: watcher' }).click();
      await row.getByText('revoked').waitFor();
      await screenshot(admin, 'client-revoked');

      await watcher.getByTestId('signed-out').waitFor({ timeout: 15_000 });
      assert.match((await watcher.getByTestId('signed-out').textContent())!, /no longer accepts this session/);
      assert.equal(await watcher.evaluate("sessionStorage.getItem('lmsp.session')"), null);
      await screenshot(watcher, 'signed-out-after-revoke');
      await assertAccessible(watcher, 'signed out');

      // The admin makes a pairing code from the page; it pairs a new client. On a short window
      // the code, under the button, is brought into sight, and it is announced with the code.
      await admin.setViewportSize({ width: 1280, height: 500 });
      await admin.evaluate('window.scrollTo(0, 0)');
      await admin.getByLabel('Name').fill('new app');
      await admin.getByRole('button', { name: 'Make code' }).click();
      const code = (await admin.getByTestId('pairing-code').textContent())!;
      await admin.getByRole('status').filter({ hasText: `Pairing code made: ${code}.` }).waitFor();
      await waitFor(async () => (await admin.getByTestId('pairing-code').evaluate((element) => {
        const box = element.getBoundingClientRect();
        return box.top >= 0 && box.bottom <= element.ownerDocument.defaultView!.innerHeight + 1;
      })) || null, { what: 'the pairing code in sight', timeoutMs: 5000 });
      const paired = await fetch(`${service.url}/v1/pair`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ code, client_name: 'new app' }) });
      assert.equal(paired.status, 201);
    })));

  test('the Clients view pages its list, newest pairings first', () =>
    withService({}, (service) => withBrowser(async (browser) => {
      for (let i = 0; i < 50; i += 1) await pairClient(service, ['models:read'], `app ${i}`);
      const page = await browser.newPage();
      await signIn(page, service, ['admin'], 'admin');
      await openView(page, service, '#/clients', 'Clients');
      const rows = page.getByRole('region', { name: 'Paired clients' }).locator('tbody tr');
      // 52 clients: the operator, 50 apps, the signed-in admin; 50 on the first page.
      await page.getByRole('cell', { name: 'admin (you)' }).waitFor();
      assert.equal(await rows.count(), 50);
      assert.equal(await page.getByRole('cell', { name: 'operator', exact: true }).count(), 0, 'the oldest is on the next page');
      await page.getByRole('button', { name: 'Older' }).click();
      await page.getByRole('cell', { name: 'operator', exact: true }).waitFor();
      assert.equal(await rows.count(), 2);
      await assertAccessible(page, 'clients, second page');
    })));

  test('pull a model from a local server, with its progress on the Models view', (t) => withLocalModelServer(async (endpoint, serveFile) =>
    withService({ env: { LMSP_HF_ENDPOINT: endpoint } }, async (service) => {
      serveFile(join(service.dataDir, 'models', 'lmsp-tiny.gguf'));
      const probe = await api(service, '/v1/models/pull', { method: 'POST', json: {} });
      if (probe.status === 404 && /^No route/.test(((await probe.json()) as { error: { message: string } }).error.message)) {
        t.skip('POST /v1/models/pull (LMSP 5.1) is not served by this build');
        return;
      }
      await withBrowser(async (browser) => {
        const page = await browser.newPage();
        await signIn(page, service, ['admin']);
        await openView(page, service, '#/models', 'Models');
        await page.getByLabel('Source').fill('hf:lmsp/tiny/lmsp-tiny.gguf');
        await page.getByLabel('Model id').fill('pulled-tiny');
        await page.getByRole('button', { name: 'Pull' }).click();
        await page.getByText(/^Pull started as task /).waitFor();
        assert.deepEqual([await page.getByLabel('Source').inputValue(), await page.getByLabel('Model id').inputValue()], ['', ''],
          'the form is emptied: a second press does not send the same pull again');
        await page.locator('.pull-progress progress').first().waitFor({ timeout: 30_000 });
        await screenshot(page, 'model-pull-progress');
        await assertAccessible(page, 'models (pulling)');
        // The Pulls list names the model each pull registers, not only its task.
        await page.locator('.pulls li').filter({ hasText: 'pulled-tiny' }).first().waitFor();
        await page.getByRole('cell', { name: 'pulled-tiny' }).waitFor({ timeout: 60_000 });
        const tasks = (await (await api(service, '/v1/tasks?limit=10')).json()) as { data: TaskObject[] };
        const pull = tasks.data.find((task) => (task.kind as string) === 'model_pull' && task.status === 'completed');
        assert.ok(pull);
        // A pull that fails says why in the list, in the service's words, not by its code alone.
        await page.getByLabel('Source').fill('hf:lmsp/tiny/missing.gguf');
        await page.getByLabel('Model id').fill('missing-tiny');
        await page.getByRole('button', { name: 'Pull' }).click();
        const failedRow = page.locator('.pulls li').filter({ hasText: 'missing-tiny' }).filter({ has: page.locator('.badge', { hasText: 'failed' }) });
        await failedRow.waitFor({ timeout: 30_000 });
        const failed = ((await (await api(service, '/v1/tasks?limit=10')).json()) as { data: TaskObject[] }).data.find((task) => task.model === 'missing-tiny');
        assert.ok(failed?.error, 'the failed pull has an error');
        await failedRow.filter({ hasText: failed.error.message }).waitFor();
        assert.match(await failedRow.locator('.pull-error').textContent() ?? '', new RegExp(`^${failed.error.code} `));
        await screenshot(page, 'model-pull-failed');
        await assertAccessible(page, 'models (a failed pull)');
        // A pull's own page shows its download, not an empty text output, and counts its whole log.
        await page.goto(`${service.url}/#/tasks/${pull.id}`);
        await page.getByRole('heading', { level: 2, name: 'Download' }).waitFor();
        assert.equal(await page.getByText('No output yet.').count(), 0);
        await page.getByText(`${pull.last_sequence_number} events`).first().waitFor();
        const shown = await page.locator('.facts div').filter({ hasText: 'Events' }).locator('dd').textContent();
        assert.equal(shown, String(pull.last_sequence_number));
        await assertAccessible(page, 'a pull task');
      });
    })));

  test('a pull is cancelled from its row on the Models view, by a token that can only write models', () => withLocalModelServer(async (endpoint, serveFile) =>
    withService({ env: { LMSP_HF_ENDPOINT: endpoint } }, async (service) => {
      serveFile(join(service.dataDir, 'models', 'lmsp-tiny.gguf'));
      await withBrowser(async (browser) => {
        const page = await browser.newPage();
        await signIn(page, service, ['models:write']);
        // LMSP 15: the pull form needs models:write alone; the registry, which needs models:read, is left out.
        await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Models' }).click();
        await page.getByRole('heading', { level: 1, name: 'Models' }).waitFor();
        await page.getByText('The list of registered models needs the models:read scope').waitFor();
        assert.equal(await page.getByRole('table', { name: 'Registered models' }).count(), 0);
        await page.getByLabel('Source').fill('hf:lmsp/tiny/lmsp-tiny.gguf');
        await page.getByLabel('Model id').fill('slow-tiny');
        await page.getByRole('button', { name: 'Pull' }).click();
        await page.getByText(/^Pull started as task /).waitFor();
        // Without the responses scope, the pull is still listed: it is this client's own task.
        const row = page.locator('.pulls li').filter({ hasText: 'slow-tiny' });
        await row.locator('.pull-progress progress').waitFor({ timeout: 30_000 });
        const partial = join(service.dataDir, 'models', 'slow-tiny.gguf.partial');
        await waitFor(() => existsSync(partial) || null, { what: 'the partial file', timeoutMs: 10_000 });
        await screenshot(page, 'model-pull-cancel-button');
        await assertAccessible(page, 'models (a pull with its cancel button)');
        await row.getByRole('button', { name: 'Cancel the pull of slow-tiny' }).click();
        await row.locator('.badge', { hasText: 'cancelled' }).waitFor({ timeout: 10_000 });
        assert.equal(await row.getByRole('button', { name: /Cancel the pull/ }).count(), 0, 'no cancel button on a cancelled pull');
        await screenshot(page, 'model-pull-cancelled');
        // The pull's task page, linked from its row, is this session's too.
        await row.getByRole('link', { name: /^task_/ }).click();
        await page.getByRole('heading', { level: 1, name: /^Task task_/ }).waitFor();
        await page.getByText('model.pull.cancelled').first().waitFor();
        assert.equal(await page.locator('.notice').filter({ hasText: 'needs the' }).count(), 0);
        const tasks = (await (await api(service, '/v1/tasks?limit=10')).json()) as { data: TaskObject[] };
        const pull = tasks.data.find((task) => task.model === 'slow-tiny');
        assert.equal(pull?.status, 'cancelled');
        assert.equal(existsSync(partial), false, 'cancelling removed the partial file');
        assert.equal(existsSync(join(service.dataDir, 'models', 'slow-tiny.gguf')), false);
        assert.equal((await api(service, '/v1/models/slow-tiny')).status, 404, 'nothing was registered');
      });
    }), 1000));
});

/**
 * Serves a GGUF file (the built-in model's, once the service has written it) as
 * `<endpoint>/lmsp/tiny/resolve/main/lmsp-tiny.gguf`, slowly (chunks with pauses), so that a pull
 * takes long enough to show its progress (`pauseMs` between chunks of 32 KiB); range requests are
 * honoured.
 */
async function withLocalModelServer<T>(test: (endpoint: string, serveFile: (path: string) => void) => Promise<T>, pauseMs = 150): Promise<T> {
  let file: Buffer | null = null;
  const server: Server = createServer((request, response) => {
    if (!file || request.url !== '/lmsp/tiny/resolve/main/lmsp-tiny.gguf') {
      response.writeHead(404).end();
      return;
    }
    const body = file;
    const start = Number(/bytes=(\d+)-/.exec(request.headers.range ?? '')?.[1] ?? 0);
    response.writeHead(start > 0 ? 206 : 200, { 'content-length': String(body.length - start), 'accept-ranges': 'bytes' });
    let offset = start;
    const step = () => {
      if (offset >= body.length || response.destroyed) return void response.end();
      const chunk = body.subarray(offset, offset + 32 * 1024);
      offset += chunk.length;
      response.write(chunk);
      setTimeout(step, pauseMs);
    };
    step();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    return await test(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, (path) => {
      file = readFileSync(path);
    });
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}
