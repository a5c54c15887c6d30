/**
 * The dashboard in Firefox (LMSP 15: "works in a current Chromium and Firefox"): Debian's
 * `firefox-esr` driven by puppeteer-core over WebDriver BiDi, which downloads no browser of its
 * own (playwright-core drives only its own patched Firefox). Sign in with a pairing code, follow
 * a task's text live over server-sent events, cancel a task, list the clients, and no
 * axe violation; no script error and no Content-Security-Policy violation on the way.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { LmspClient } from '../../src/api/client.js';
import { SCREENSHOTS } from '../helpers/browser.js';
import { waitFor, withService, type TestService } from '../helpers/service.js';

const FIREFOX = ['/usr/bin/firefox-esr', '/usr/bin/firefox'].find((path) => existsSync(path)) ?? null;
const NO_FIREFOX = FIREFOX ? null : 'no Firefox at /usr/bin/firefox-esr or /usr/bin/firefox (apt-get install firefox-esr)';
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

interface Firefox {
  page: Page;
  problems: string[];
}

async function withFirefox<T>(run: (firefox: Firefox) => Promise<T>): Promise<T> {
  // The window's size, not a viewport override: puppeteer sets one with a screen orientation
  // override too, a WebDriver BiDi command that Firefox ESR 140 does not know.
  const browser: Browser = await puppeteer.launch({
    browser: 'firefox', executablePath: FIREFOX!, headless: true, defaultViewport: null, args: ['--width=1280', '--height=900'],
  });
  try {
    const page = await browser.newPage();
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(`script error: ${String(error)}`));
    page.on('console', (message) => {
      if (/Content[- ]Security[- ]Policy/i.test(message.text())) problems.push(`CSP: ${message.text()}`);
    });
    const result = await run({ page, problems });
    assert.deepEqual(problems, [], 'the page had problems');
    return result;
  } finally {
    await browser.close();
  }
}

async function shoot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `firefox-${name}.png`) as `${string}.png`, fullPage: true });
}

async function assertAccessible(page: Page, view: string): Promise<void> {
  await page.evaluate(axeSource);
  const violations = await page.evaluate(`axe.run(document, { resultTypes: ['violations'] }).then((result) => result.violations
    .map((v) => v.impact + ' ' + v.id + ': ' + v.help + ' (' + v.nodes.map((n) => n.target.join(' ')).join('; ') + ')'))`) as string[];
  assert.deepEqual(violations, [], `axe in Firefox, ${view}`);
}

const textOf = (page: Page, selector: string) => page.$eval(selector, (element) => element.textContent ?? '').catch(() => null);

async function signIn(page: Page, service: TestService, scopes: string[]): Promise<LmspClient> {
  const code = await service.client.createPairingCode({ name: 'firefox', scopes });
  await page.goto(`${service.url}/`);
  await page.waitForSelector('#pairing-code');
  await page.type('#pairing-code', code.code);
  await page.click('button[type=submit]');
  await page.waitForSelector('nav.sections');
  const session = JSON.parse(await page.evaluate("sessionStorage.getItem('lmsp.session')") as string) as { token: string };
  return new LmspClient({ baseUrl: service.url, token: session.token });
}

describe('the dashboard in Firefox (LMSP 15)', { skip: NO_FIREFOX ?? false }, () => {
  test('sign in, every view without an axe violation, follow a task live, cancel one, list the clients', { timeout: 180_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '30' } }, (service) => withFirefox(async ({ page }) => {
      const client = await signIn(page, service, ['admin']);
      for (const [hash, heading] of [['#/', 'Overview'], ['#/tasks', 'Tasks'], ['#/responses', 'Responses'], ['#/chat', 'Chat completions'],
        ['#/models', 'Models'], ['#/clients', 'Clients']] as const) {
        await page.goto(`${service.url}/${hash}`);
        await waitFor(async () => (await textOf(page, 'h1')) === heading, { what: `the ${heading} view` });
        await assertAccessible(page, heading);
      }
      await shoot(page, 'models');

      // A task's text arrives over server-sent events while it runs.
      const created = (await client.createResponse({ model: 'lmsp-tiny', input: 'a story', max_output_tokens: 120, background: true, seed: 3 })).body;
      await page.goto(`${service.url}/#/tasks/${created.task.id}`);
      const partial = await waitFor(async () => {
        const text = await textOf(page, '[data-testid=output]');
        const status = await textOf(page, '.facts .badge');
        return text && status === 'running' ? text : null;
      }, { what: 'partial output while running' });
      await shoot(page, 'task-streaming');
      await assertAccessible(page, 'task (streaming)');
      await waitFor(async () => (await textOf(page, '.facts .badge')) === 'completed', { timeoutMs: 60_000, what: 'completed' });
      const final = (await service.client.getResponse(created.id)).output[0]!.content[0]!.text;
      assert.ok(partial.length < final.length && final.startsWith(partial), 'the text grew on the page');
      await waitFor(async () => (await textOf(page, '[data-testid=output]')) === final, { what: 'the whole text on the page' });
      const events = (await service.client.getTask(created.task.id)).last_sequence_number;
      await waitFor(async () => (await page.$$('.log tbody tr')).length === events, { what: 'every event in the log' });

      // Cancel from the page.
      const long = (await client.createResponse({ model: 'lmsp-tiny', input: 'long', max_output_tokens: 5000, background: true })).body;
      await page.goto(`${service.url}/#/tasks/${long.task.id}`);
      await waitFor(async () => (await textOf(page, '.facts .badge')) === 'running', { what: 'running' });
      await page.click('.facts ~ button.danger');
      await waitFor(async () => (await textOf(page, '.facts .badge')) === 'cancelled', { what: 'cancelled on the page' });
      assert.equal((await service.client.getTask(long.task.id)).status, 'cancelled');
      await shoot(page, 'task-cancelled');

      // The Clients view: this session and the operator, newest first.
      await page.goto(`${service.url}/#/clients`);
      await page.waitForSelector('tbody tr');
      const names = () => page.$$eval('tbody tr td:first-child', (cells) => cells.map((cell) => cell.textContent).join('|'));
      await waitFor(async () => (await names()) === 'dashboard (you)|operator', { timeoutMs: 5000, what: 'the clients listed' }).catch(async (error) => {
        throw new Error(`${(error as Error).message}: ${await names()}`);
      });
      await assertAccessible(page, 'clients');
    })));
});
